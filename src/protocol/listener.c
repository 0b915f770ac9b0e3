/*
 * listener.c - dispatch of the feed of ended leases (lease/listener.h) to
 * its backend's implementation, and the mode every implementation shares.
 */
#include "lease/listener.h"

const char *lease_listener_mode_name(lease_listener_mode_t mode)
{
    switch (mode) {
    case LEASE_LISTENER_LISTENING:
        return "listening";
    case LEASE_LISTENER_POLLING:
        return "polling";
    case LEASE_LISTENER_DOWN:
        break;
    }
    return "down";
}

/* The hub's thread changes the mode; /metrics and /readyz read it from
 * request threads, hence the atomics. */
void lease_listener_set_mode(lease_listener_t *l, lease_listener_mode_t mode)
{
    __atomic_store_n(&l->mode, mode, __ATOMIC_RELEASE);
}

lease_listener_mode_t lease_listener_mode(const lease_listener_t *l)
{
    return __atomic_load_n(&l->mode, __ATOMIC_ACQUIRE);
}

void lease_listener_close(lease_listener_t *l)
{
    if (l)
        l->ops->close(l);
}

lease_listener_mode_t lease_listener_wait(lease_listener_t *l, int wake_fd, int64_t timeout_ms,
                                          lease_listener_ended_fn ended, void *arg,
                                          bool *new_session)
{
    return l->ops->wait(l, wake_fd, timeout_ms, ended, arg, new_session);
}

lease_code_t lease_listener_poll(lease_listener_t *l, const char *const *ids, size_t n,
                                 const lease_deadline_t *deadline, lease_listener_ended_fn ended,
                                 void *arg)
{
    return l->ops->poll(l, ids, n, deadline, ended, arg);
}
