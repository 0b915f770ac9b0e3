/*
 * http_hangup.c - one epoll thread over the sockets of waiting requests
 * (see http_hangup.h).
 *
 * Registrations are one-shot (EPOLLRDHUP | EPOLLONESHOT): a hang-up is
 * reported once. The table from descriptor to function is guarded by one
 * mutex; the thread looks an event up under it and checks with poll() that
 * the descriptor is hung up now, so an event that raced with forget (and a
 * descriptor number reused since) calls nothing.
 */
#include "http_hangup.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct watched {
    bool on;
    void *arg;
} watched_t;

struct leased_hangup {
    int epfd, stop_fd;
    leased_hangup_mark_fn mark;
    leased_hangup_then_fn then;
    void *cls;
    pthread_t thread;
    pthread_mutex_t mu;
    watched_t *by_fd; /* indexed by descriptor */
    size_t cap;
    bool stop;
};

static bool hung_up(int fd)
{
    struct pollfd p = {fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void *hangup_main(void *self)
{
    leased_hangup_t *hu = self;
    struct epoll_event ev[64];
    void *gone[64];
    for (;;) {
        int n = epoll_wait(hu->epfd, ev, 64, -1);
        if (n < 0 && errno != EINTR)
            break;
        int k = 0;
        pthread_mutex_lock(&hu->mu);
        bool stop = hu->stop;
        for (int i = 0; i < n && !stop; i++) {
            int fd = ev[i].data.fd;
            if (fd == hu->stop_fd || fd < 0 || (size_t)fd >= hu->cap || !hu->by_fd[fd].on)
                continue;
            if (!hung_up(fd))
                continue; /* stale: forgotten, and the number reused */
            void *arg = hu->by_fd[fd].arg;
            hu->by_fd[fd] = (watched_t){0};
            epoll_ctl(hu->epfd, EPOLL_CTL_DEL, fd, NULL);
            hu->mark(arg);
            gone[k++] = arg;
        }
        pthread_mutex_unlock(&hu->mu);
        for (int i = 0; i < k; i++)
            hu->then(hu->cls, gone[i]);
        if (stop)
            break;
    }
    return NULL;
}

leased_hangup_t *leased_hangup_start(leased_hangup_mark_fn mark, leased_hangup_then_fn then,
                                     void *cls)
{
    leased_hangup_t *hu = calloc(1, sizeof *hu);
    if (!hu)
        return NULL;
    hu->mark = mark;
    hu->then = then;
    hu->cls = cls;
    hu->epfd = epoll_create1(EPOLL_CLOEXEC);
    hu->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&hu->mu, NULL);
    struct epoll_event e = {.events = EPOLLIN, .data.fd = hu->stop_fd};
    if (hu->epfd < 0 || hu->stop_fd < 0 ||
        epoll_ctl(hu->epfd, EPOLL_CTL_ADD, hu->stop_fd, &e) != 0 ||
        pthread_create(&hu->thread, NULL, hangup_main, hu) != 0) {
        if (hu->epfd >= 0)
            close(hu->epfd);
        if (hu->stop_fd >= 0)
            close(hu->stop_fd);
        pthread_mutex_destroy(&hu->mu);
        free(hu);
        return NULL;
    }
    return hu;
}

void leased_hangup_stop(leased_hangup_t *hu)
{
    if (!hu)
        return;
    pthread_mutex_lock(&hu->mu);
    hu->stop = true;
    pthread_mutex_unlock(&hu->mu);
    uint64_t one = 1;
    ssize_t w = write(hu->stop_fd, &one, sizeof one);
    (void)w;
    pthread_join(hu->thread, NULL);
    close(hu->epfd);
    close(hu->stop_fd);
    pthread_mutex_destroy(&hu->mu);
    free(hu->by_fd);
    free(hu);
}

bool leased_hangup_watch(leased_hangup_t *hu, int fd, void *arg)
{
    if (!hu || fd < 0)
        return false;
    bool ok = false;
    pthread_mutex_lock(&hu->mu);
    if ((size_t)fd >= hu->cap) {
        size_t cap = hu->cap ? hu->cap : 256;
        while (cap <= (size_t)fd)
            cap *= 2;
        watched_t *grown = realloc(hu->by_fd, cap * sizeof *grown);
        if (!grown)
            goto out;
        memset(grown + hu->cap, 0, (cap - hu->cap) * sizeof *grown);
        hu->by_fd = grown;
        hu->cap = cap;
    }
    struct epoll_event e = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.fd = fd};
    if (epoll_ctl(hu->epfd, EPOLL_CTL_ADD, fd, &e) != 0)
        goto out;
    hu->by_fd[fd] = (watched_t){true, arg};
    ok = true;
out:
    pthread_mutex_unlock(&hu->mu);
    return ok;
}

void leased_hangup_forget(leased_hangup_t *hu, int fd)
{
    if (!hu || fd < 0)
        return;
    pthread_mutex_lock(&hu->mu);
    if ((size_t)fd < hu->cap && hu->by_fd[fd].on) {
        hu->by_fd[fd] = (watched_t){0};
        epoll_ctl(hu->epfd, EPOLL_CTL_DEL, fd, NULL);
    }
    pthread_mutex_unlock(&hu->mu);
}

void leased_hangup_lock(leased_hangup_t *hu)
{
    pthread_mutex_lock(&hu->mu);
}

void leased_hangup_unlock(leased_hangup_t *hu)
{
    pthread_mutex_unlock(&hu->mu);
}
