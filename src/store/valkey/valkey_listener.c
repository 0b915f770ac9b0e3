/*
 * valkey_listener.c - the Valkey/Redis feed of ended leases
 * (include/lease/listener.h): SUBSCRIBE lease:{ns}:ended on a connection of
 * its own, and the batched poll FCALL_RO leased_v1_watch_ended on a second
 * one (a subscribed RESP2 connection takes no other command, and the
 * hiredis this builds on speaks no RESP3). Both over plain TCP or TLS, as
 * the store URL says (valkey_transport.h).
 *
 * Every function of leased_v1 that ends a lease PUBLISHes its id there as
 * its last write (leased.lua, publish_ended). Pub/Sub is at-most-once: a
 * message published while the subscriber is disconnected, or dropped with
 * a subscriber the server cut off (client-output-buffer-limit, CLIENT
 * KILL), is gone for good. That is safe because no watch depends on a
 * message: the hub polls every LEASE_WATCH_POLL_MS while anything is
 * parked, and at once after every new session (wait reports new_session,
 * exactly as pg_listener.c does after LISTEN on a new session), and a lease
 * the poll reports ended has ended for good. A message only makes the wake
 * sooner.
 *
 * Both connections belong to one thread (the watch hub), so nothing here
 * locks. Anything that goes wrong drops both, and they are made again after
 * a backoff (100 ms doubling to 5 s), with one warn line per outage, as on
 * PostgreSQL. They only read, so there is no outcome to resolve.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/log.h"
#include "lease/store_valkey.h"
#include "valkey_connect.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define POLL_IDS_MAX 100000 /* leased_v1_watch_ended's limit */

typedef struct valkey_listener {
    lease_listener_t base; /* base.mode: written by the hub's thread only */
    valkey_endpoint_t ep;  /* the password wiped at close */
    char ns_key[96];       /* lease:{ns}:ns */
    char channel[96];      /* lease:{ns}:ended */
    bool want_subscribe;
    valkey_transport_t *sub; /* subscribed; NULL when none (or polling only) */
    valkey_transport_t *cmd; /* the poll's; NULL: no session */
    int64_t next_connect_ns;
    int64_t backoff_ms;
    bool down_logged;
} valkey_listener_t;

static const lease_listener_ops_t valkey_listener_ops;

/* Ends the session (message may point into it: it is copied first). */
static void drop_session(valkey_listener_t *l, const char *why, const char *message)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", message ? message : "");
    valkey_transport_free(l->sub);
    valkey_transport_free(l->cmd);
    l->sub = l->cmd = NULL;
    if (!l->down_logged) {
        LOG_WARN("watch: %s: %s (ended leases are found again once the session is back)", why,
                 copy);
        l->down_logged = true;
    }
    lease_listener_set_mode(&l->base, LEASE_LISTENER_DOWN);
    l->next_connect_ns = lease_mono_now_ns() + l->backoff_ms * 1000000;
    l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
}

/* One of the feed's connections, named leased-watch (CLIENT LIST tells it
 * from the pool's, as application_name does on PostgreSQL). NULL with why
 * in msg. */
static valkey_transport_t *connect_named(valkey_listener_t *l, char *msg, size_t msgsz)
{
    valkey_transport_t *c = valkey_connect(&l->ep, msg, msgsz);
    redisReply *r = c ? valkey_transport_command(c, "CLIENT SETNAME leased-watch") : NULL;
    if (c && (r == NULL || r->type != REDIS_REPLY_STATUS)) {
        snprintf(msg, msgsz, "CLIENT SETNAME: %s",
                 r == NULL                      ? valkey_transport_error(c)
                 : r->type == REDIS_REPLY_ERROR ? r->str
                                                : "unexpected answer");
        valkey_transport_free(c);
        c = NULL;
    }
    if (r)
        valkey_reply_free(r);
    return c;
}

/* Connects both (or, polling only, one) and subscribes. True when a
 * session exists afterwards. */
static bool make_session(valkey_listener_t *l)
{
    if (lease_mono_now_ns() < l->next_connect_ns)
        return false;
    char msg[256] = "";
    l->cmd = connect_named(l, msg, sizeof msg);
    if (l->cmd && l->want_subscribe)
        l->sub = connect_named(l, msg, sizeof msg);
    if (!l->cmd || (l->want_subscribe && !l->sub)) {
        drop_session(l, "watch_connect_failed", msg);
        return false;
    }
    if (l->sub) {
        redisReply *r = valkey_transport_command(l->sub, "SUBSCRIBE %s", l->channel);
        bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  strcmp(r->element[0]->str, "subscribe") == 0;
        bool refused = r && r->type == REDIS_REPLY_ERROR;
        snprintf(msg, sizeof msg, "%s",
                 r == NULL ? valkey_transport_error(l->sub)
                 : refused ? r->str
                           : "unexpected answer to SUBSCRIBE");
        if (r)
            valkey_reply_free(r);
        if (refused) {
            /* the server said no (an ACL user without the channel): it will
             * say so again; poll instead, as behind a pooler on PostgreSQL */
            valkey_transport_free(l->sub);
            l->sub = NULL;
            LOG_WARN("watch: SUBSCRIBE %s refused (%s): ended leases are found by polling "
                     "only; grant the store URL's user the channel (&%s)",
                     l->channel, msg, l->channel);
        } else if (!ok) {
            drop_session(l, "watch_subscribe_failed", msg);
            return false;
        }
    }
    if (l->sub) {
        lease_listener_set_mode(&l->base, LEASE_LISTENER_LISTENING);
        LOG_INFO("watch: subscribed to %s", l->channel);
    } else {
        lease_listener_set_mode(&l->base, LEASE_LISTENER_POLLING);
        if (!l->want_subscribe)
            LOG_INFO("watch: SUBSCRIBE switched off (LEASE_WATCH_LISTEN=false): polling only");
    }
    l->down_logged = false;
    l->backoff_ms = BACKOFF_FIRST_MS;
    return true;
}

static int wait_fds(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    int rc;
    do
        rc = poll(fds, n, timeout_ms);
    while (rc < 0 && errno == EINTR);
    return rc;
}

/* Reads what the subscriber connection has and hands every message of our
 * channel to ended; false when the connection failed (dropped here). */
static bool read_messages(valkey_listener_t *l, lease_listener_ended_fn ended, void *arg)
{
    if (!valkey_transport_read_available(l->sub)) {
        /* end of file (the server closed it: CLIENT KILL, a restart, its
         * output buffer limit) or an error */
        drop_session(l, "watch_session_lost", valkey_transport_error(l->sub));
        return false;
    }
    for (;;) {
        redisReply *r = NULL;
        if (!valkey_transport_next_reply(l->sub, &r)) {
            drop_session(l, "watch_session_lost", valkey_transport_error(l->sub));
            return false;
        }
        if (r == NULL)
            return true; /* nothing more complete in the buffer */
        /* ["message", channel, lease id] */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            r->element[1]->type == REDIS_REPLY_STRING &&
            r->element[2]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "message") == 0 &&
            strcmp(r->element[1]->str, l->channel) == 0 && r->element[2]->len > 0 && ended)
            ended(arg, r->element[2]->str);
        valkey_reply_free(r);
    }
}

static lease_listener_mode_t vl_wait(lease_listener_t *base, int wake_fd, int64_t timeout_ms,
                                     lease_listener_ended_fn ended, void *arg, bool *new_session)
{
    valkey_listener_t *l = (valkey_listener_t *)base;
    *new_session = false;
    int64_t end_ns = lease_mono_now_ns() + (timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    if (!l->cmd) {
        *new_session = make_session(l);
        if (*new_session)
            return lease_listener_mode(base); /* let the caller poll at once */
        /* no session: sleep on the wake fd until the next attempt is due */
        end_ns = l->next_connect_ns < end_ns ? l->next_connect_ns : end_ns;
    }
    int64_t ms = (end_ns - lease_mono_now_ns() + 999999) / 1000000;
    /* poll ignores a negative fd: no subscriber (polling only, or down) */
    struct pollfd fds[2] = {{.fd = l->sub ? valkey_transport_fd(l->sub) : -1, .events = POLLIN},
                            {.fd = wake_fd, .events = POLLIN}};
    int rc = wait_fds(fds, 2, ms > 0 ? (int)(ms > 60000 ? 60000 : ms) : 0);
    if (rc > 0 && fds[0].revents)
        (void)read_messages(l, ended, arg);
    return lease_listener_mode(base);
}

static lease_code_t vl_poll(lease_listener_t *base, const char *const *ids, size_t n,
                            const lease_deadline_t *deadline, lease_listener_ended_fn ended,
                            void *arg)
{
    valkey_listener_t *l = (valkey_listener_t *)base;
    if (!l->cmd && !make_session(l))
        return LEASE_BACKEND_UNAVAILABLE;
    if (n == 0)
        return LEASE_INSPECTED;
    if (n > POLL_IDS_MAX)
        n = POLL_IDS_MAX; /* never reached: LEASE_MAX_WATCHES is lower */
    const char **argv = malloc((n + 4) * sizeof *argv);
    if (!argv)
        return LEASE_BACKEND_UNAVAILABLE;
    argv[0] = "FCALL_RO";
    argv[1] = "leased_v1_watch_ended";
    argv[2] = "1";
    argv[3] = l->ns_key;
    memcpy(argv + 4, ids, n * sizeof *argv);
    redisReply *r = NULL;
    if (valkey_transport_set_timeout(l->cmd, lease_deadline_remaining_ms(deadline)))
        r = valkey_transport_command_argv(l->cmd, (int)(n + 4), argv, NULL);
    free(argv);
    bool ok = r && r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements; i++)
        ok = r->element[i]->type == REDIS_REPLY_STRING;
    if (!ok) {
        drop_session(l, "watch_poll_failed",
                     r == NULL                      ? valkey_transport_error(l->cmd)
                     : r->type == REDIS_REPLY_ERROR ? r->str
                                                    : "leased_v1_watch_ended answered no ids");
        if (r)
            valkey_reply_free(r);
        return LEASE_BACKEND_UNAVAILABLE;
    }
    for (size_t i = 0; i < r->elements && ended; i++)
        ended(arg, r->element[i]->str);
    valkey_reply_free(r);
    return LEASE_INSPECTED;
}

static void vl_close(lease_listener_t *base)
{
    valkey_listener_t *l = (valkey_listener_t *)base;
    valkey_transport_free(l->sub);
    valkey_transport_free(l->cmd);
    valkey_endpoint_wipe(&l->ep);
    free(l);
}

static const lease_listener_ops_t valkey_listener_ops = {vl_wait, vl_poll, vl_close};

int lease_valkey_listener_open(const lease_valkey_config_t *cfg, bool subscribe,
                               lease_listener_t **out, char *err, size_t errsz)
{
    *out = NULL;
    if (!cfg || !cfg->host || cfg->port <= 0 || cfg->port > 65535 || !cfg->ns ||
        strlen(cfg->ns) == 0 || strlen(cfg->ns) > 64) {
        snprintf(err, errsz, "invalid configuration of the watch feed");
        return -1;
    }
    valkey_listener_t *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    l->base.ops = &valkey_listener_ops;
    if (!valkey_endpoint_set(&l->ep, cfg, err, errsz)) {
        free(l);
        return -1;
    }
    snprintf(l->ns_key, sizeof l->ns_key, "lease:{%s}:ns", cfg->ns);
    snprintf(l->channel, sizeof l->channel, "lease:{%s}:ended", cfg->ns);
    l->want_subscribe = subscribe;
    l->backoff_ms = BACKOFF_FIRST_MS;
    *out = &l->base;
    return 0;
}
