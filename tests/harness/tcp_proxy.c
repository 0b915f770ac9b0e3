/*
 * tcp_proxy.c - the test-only delaying, answer-swallowing, request-holding
 * TCP proxy.
 */
#include "tcp_proxy.h"

#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lease/clock.h"

typedef struct pump {
    tcp_proxy_t *px;
    int from, to;
    bool answers; /* upstream -> client */
} pump_t;

/* Blocks while a hold's marker is in buf (n bytes), until released. With
 * no hold set (every user but http_shutdown) it only takes an uncontended
 * lock and forwards as before. */
static void hold_if_marked(tcp_proxy_t *px, const char *buf, size_t n)
{
    pthread_mutex_lock(&px->mu);
    if (px->hold_marker && memmem(buf, n, px->hold_marker, strlen(px->hold_marker))) {
        /* wait for this release, not for the marker to go: a hold set
         * again before this thread wakes must not keep it */
        unsigned gen = px->hold_gen;
        px->held++;
        pthread_cond_broadcast(&px->cv);
        while (px->hold_gen == gen)
            pthread_cond_wait(&px->cv, &px->mu);
        px->held--;
    }
    pthread_mutex_unlock(&px->mu);
}

static void *pump_main(void *arg)
{
    pump_t *pu = arg;
    char buf[65536];
    for (;;) {
        ssize_t n = read(pu->from, buf, sizeof buf);
        if (n <= 0)
            break;
        if (pu->answers) {
            int left = atomic_load(&pu->px->drop);
            if (left > 0 && atomic_compare_exchange_strong(&pu->px->drop, &left, left - 1))
                break; /* processed upstream; the client never hears it */
            lease_sleep_ms(atomic_load(&pu->px->delay_ms));
        } else {
            hold_if_marked(pu->px, buf, (size_t)n);
        }
        /* MSG_NOSIGNAL: a peer killed mid-pump (valkey_failover's kill -9
         * under load) is a lost link, not a SIGPIPE that ends the test */
        if (send(pu->to, buf, (size_t)n, MSG_NOSIGNAL) != n)
            break;
    }
    /* either direction ending ends the connection, like a lost link */
    shutdown(pu->from, SHUT_RDWR);
    shutdown(pu->to, SHUT_RDWR);
    return NULL;
}

static void *conn_main(void *arg)
{
    pump_t *up = arg; /* from = the client */
    tcp_proxy_t *px = up->px;
    int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)atomic_load(&px->upstream)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (server >= 0 && connect(server, (struct sockaddr *)&a, sizeof a) == 0) {
        up->to = server;
        pump_t down = {px, server, up->from, true};
        pthread_t t;
        if (pthread_create(&t, NULL, pump_main, &down) == 0) {
            pump_main(up);
            pthread_join(t, NULL);
        }
    }
    if (server >= 0)
        close(server);
    close(up->from);
    free(up);
    atomic_fetch_sub(&px->open, 1);
    return NULL;
}

static void *acceptor_main(void *arg)
{
    tcp_proxy_t *px = arg;
    while (!atomic_load(&px->stop)) {
        struct pollfd pfd = {px->listen_fd, POLLIN, 0};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int client = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0)
            continue;
        pump_t *up = calloc(1, sizeof *up);
        pthread_t t;
        if (!up) {
            close(client);
            continue;
        }
        up->px = px;
        up->from = client;
        atomic_fetch_add(&px->open, 1);
        if (pthread_create(&t, NULL, conn_main, up) != 0) {
            atomic_fetch_sub(&px->open, 1);
            close(client);
            free(up);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

bool tcp_proxy_start(tcp_proxy_t *px, uint16_t upstream)
{
    memset(px, 0, sizeof *px);
    pthread_mutex_init(&px->mu, NULL);
    pthread_cond_init(&px->cv, NULL);
    atomic_store(&px->upstream, upstream);
    px->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (px->listen_fd < 0 || bind(px->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(px->listen_fd, 64) != 0 ||
        getsockname(px->listen_fd, (struct sockaddr *)&a, &len) != 0) {
        perror("tcp_proxy: listen");
        if (px->listen_fd >= 0)
            close(px->listen_fd);
        return false;
    }
    px->port = ntohs(a.sin_port);
    if (pthread_create(&px->acceptor, NULL, acceptor_main, px) != 0) {
        close(px->listen_fd);
        return false;
    }
    return true;
}

void tcp_proxy_stop(tcp_proxy_t *px)
{
    atomic_store(&px->stop, true);
    atomic_store(&px->delay_ms, 0);
    /* a held connection would never end by itself */
    tcp_proxy_release(px);
    pthread_join(px->acceptor, NULL);
    close(px->listen_fd);
    lease_deadline_t until = lease_deadline_in(10000);
    while (atomic_load(&px->open) > 0 && !lease_deadline_passed(&until))
        lease_sleep_ms(10);
}

void tcp_proxy_hold(tcp_proxy_t *px, const char *marker)
{
    pthread_mutex_lock(&px->mu);
    px->hold_marker = marker;
    pthread_mutex_unlock(&px->mu);
}

int tcp_proxy_held(tcp_proxy_t *px)
{
    pthread_mutex_lock(&px->mu);
    int held = px->held;
    pthread_mutex_unlock(&px->mu);
    return held;
}

void tcp_proxy_release(tcp_proxy_t *px)
{
    pthread_mutex_lock(&px->mu);
    px->hold_marker = NULL;
    px->hold_gen++;
    pthread_cond_broadcast(&px->cv);
    pthread_mutex_unlock(&px->mu);
}

uint16_t tcp_proxy_port(const tcp_proxy_t *px)
{
    return px->port;
}

void tcp_proxy_retarget(tcp_proxy_t *px, uint16_t upstream)
{
    atomic_store(&px->upstream, upstream);
}

void tcp_proxy_url(const tcp_proxy_t *px, char *out, size_t outsz)
{
    snprintf(out, outsz, "http://127.0.0.1:%u", (unsigned)px->port);
}
