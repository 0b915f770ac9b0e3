/*
 * raw_http.c - HTTP over a plain socket for tests (see raw_http.h).
 */
#include "raw_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RAW_BUF_MAX (4 * 1024 * 1024)

struct raw_conn {
    int fd;
    char *buf;
    size_t len, cap;
    bool eof;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static raw_conn_t *connect_to(int port, const char *local_addr, bool async)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    if (local_addr) {
        struct sockaddr_in la = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, local_addr, &la.sin_addr) != 1 ||
            bind(fd, (struct sockaddr *)&la, sizeof la) != 0) {
            close(fd);
            return NULL;
        }
    }
    if (async)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && !(async && errno == EINPROGRESS)) {
        close(fd);
        return NULL;
    }
    raw_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    return c;
}

raw_conn_t *raw_connect(int port, const char *local_addr)
{
    return connect_to(port, local_addr, false);
}

raw_conn_t *raw_connect_async(int port, const char *local_addr)
{
    return connect_to(port, local_addr, true);
}

int raw_fd(const raw_conn_t *c)
{
    return c->fd;
}

bool raw_send_bytes(raw_conn_t *c, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {c->fd, POLLOUT, 0};
            poll(&pfd, 1, 1000);
            continue;
        }
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool raw_send(raw_conn_t *c, const char *text)
{
    return raw_send_bytes(c, text, strlen(text));
}

/* Reads what is there (waiting until deadline); false on EOF/error/timeout. */
static bool fill(raw_conn_t *c, long long deadline)
{
    if (c->eof)
        return false;
    long long left = deadline - now_ms();
    if (left <= 0)
        return false;
    struct pollfd pfd = {c->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, (int)left);
    if (pr <= 0)
        return false;
    if (c->len + 65536 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 131072;
        if (cap > RAW_BUF_MAX)
            return false;
        char *nb = realloc(c->buf, cap + 1);
        if (!nb)
            return false;
        c->buf = nb;
        c->cap = cap;
    }
    ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
    if (n > 0) {
        c->len += (size_t)n;
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    c->eof = true;
    return false;
}

static const char *find_head_end(const char *buf, size_t len)
{
    for (size_t i = 3; i < len; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
            return buf + i + 1;
    return NULL;
}

const char *raw_header(const raw_resp_t *r, const char *name)
{
    static __thread char value[512];
    size_t n = strlen(name);
    for (const char *line = strstr(r->head, "\r\n"); line && line[2];
         line = strstr(line + 2, "\r\n")) {
        const char *l = line + 2;
        if (strncasecmp(l, name, n) == 0 && l[n] == ':') {
            const char *v = l + n + 1;
            while (*v == ' ')
                v++;
            size_t vl = strcspn(v, "\r");
            if (vl >= sizeof value)
                vl = sizeof value - 1;
            memcpy(value, v, vl);
            value[vl] = '\0';
            return value;
        }
    }
    return NULL;
}

raw_resp_t *raw_read(raw_conn_t *c, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    const char *end;
    while (!c->buf || !(end = find_head_end(c->buf, c->len)))
        if (!fill(c, deadline))
            return NULL;
    size_t head_len = (size_t)(end - c->buf);
    raw_resp_t *r = calloc(1, sizeof *r);
    r->head = strndup(c->buf, head_len);
    if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1) {
        raw_resp_free(r);
        return NULL;
    }
    const char *cl = raw_header(r, "Content-Length");
    size_t body_len = cl ? (size_t)strtoul(cl, NULL, 10) : 0;
    while (c->len < head_len + body_len)
        if (!fill(c, deadline)) {
            raw_resp_free(r);
            return NULL;
        }
    r->body = strndup(c->buf + head_len, body_len);
    r->body_len = body_len;
    json_error_t jerr;
    r->json = json_loads(r->body, 0, &jerr);
    memmove(c->buf, c->buf + head_len + body_len, c->len - head_len - body_len);
    c->len -= head_len + body_len;
    return r;
}

bool raw_closed(raw_conn_t *c, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    while (!c->eof) {
        size_t before = c->len;
        if (!fill(c, deadline) && !c->eof)
            return false;
        if (c->len > before && c->len > RAW_BUF_MAX / 2)
            return false;
    }
    return true;
}

void raw_close(raw_conn_t *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c->buf);
    free(c);
}

const char *raw_str(const raw_resp_t *r, const char *key)
{
    return r && r->json ? json_string_value(json_object_get(r->json, key)) : NULL;
}

void raw_resp_free(raw_resp_t *r)
{
    if (!r)
        return;
    free(r->head);
    free(r->body);
    json_decref(r->json);
    free(r);
}

raw_resp_t *raw_call(int port, const char *local_addr, const char *text)
{
    raw_conn_t *c = raw_connect(port, local_addr);
    if (!c)
        return NULL;
    raw_resp_t *r = raw_send(c, text) ? raw_read(c, 10000) : NULL;
    raw_close(c);
    return r;
}

char *raw_post_text(const char *path, const char *token, const char *body)
{
    char *req = NULL;
    if (asprintf(&req,
                 "POST %s HTTP/1.1\r\nHost: leased\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 path, token, strlen(body), body) < 0)
        return NULL;
    return req;
}
