/*
 * valkey_transport.c - see valkey_transport.h (why this is ours: hiredis
 * 0.14.1 has no TLS, and its redisContext cannot have TLS put under it).
 */
#include "valkey_transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define READ_CHUNK 16384 /* a TLS record's largest plaintext: one read takes it whole */

/*
 * Replies live in blocks of one allocation each, not one malloc per object
 * as hiredis' own reply functions make them: an answer of the leased_v1
 * functions is ~50 objects (a flat name/value array and the lease's), and
 * their calloc/malloc and free were ~35 k of the ~370 k instructions leased
 * spent per request on Valkey (docs/benchmarks.md, "leased on Valkey").
 * The reader builds one reply at a time, top object first (its task has no
 * parent), so that object opens a reply's first block, and the block's
 * header sits right before it: valkey_reply_free finds the chain from the
 * reply alone. The objects are ordinary redisReply structs; only their
 * freeing differs (valkey_reply_free, never freeReplyObject).
 */
#define REPLY_BLOCK 4096

typedef struct reply_block {
    struct reply_block *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
} reply_block_t;

struct valkey_transport {
    int fd;
    SSL *ssl;                /* NULL: plain TCP */
    redisReader *reader;     /* hiredis' reply parser, fed by us, with reply_functions */
    reply_block_t *building; /* the last block of the reply being read */
    int64_t timeout_ms;      /* what the socket's timeouts are set to; 0: not known */
    char *out;               /* command_argv's command, kept for the next one */
    size_t out_cap;
    bool answered;    /* a reply has been read (see hint_first_failure) */
    bool failed;      /* unusable: a read or write failed */
    bool client_cert; /* TLS with a client certificate */
    char errstr[256];
};

void valkey_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* OpenSSL's reason for the last failure ("certificate verify failed"). */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *why = e ? ERR_reason_error_string(e) : NULL;
    return why ? why : "no reason given";
}

/* A failed read or write: the connection is not used again. ssl_rc is
 * SSL_read/SSL_write's result (0 for plain TCP), sys the errno, eof whether
 * the server closed it. */
static void io_failed(valkey_transport_t *t, int ssl_rc, int sys, bool eof)
{
    t->failed = true;
    int e = t->ssl && !eof ? SSL_get_error(t->ssl, ssl_rc) : SSL_ERROR_NONE;
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && sys == 0))
        eof = true;
    if (eof)
        snprintf(t->errstr, sizeof t->errstr, "the server closed the connection");
    else if (sys == EAGAIN || sys == EWOULDBLOCK || e == SSL_ERROR_WANT_READ ||
             e == SSL_ERROR_WANT_WRITE)
        snprintf(t->errstr, sizeof t->errstr, "timed out");
    else if (e == SSL_ERROR_SSL)
        snprintf(t->errstr, sizeof t->errstr, "TLS: %s", ssl_reason());
    else
        snprintf(t->errstr, sizeof t->errstr, "%s", strerror(sys));
}

/* Reads what arrives within the socket's timeout: > 0 bytes, or -1 (failed). */
static ssize_t read_some(valkey_transport_t *t, char *buf, size_t cap)
{
    if (t->ssl == NULL) {
        ssize_t n;
        do
            n = recv(t->fd, buf, cap, 0);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
            io_failed(t, 0, n < 0 ? errno : 0, n == 0);
        return n > 0 ? n : -1;
    }
    ERR_clear_error();
    errno = 0;
    int n = SSL_read(t->ssl, buf, (int)cap);
    if (n <= 0)
        io_failed(t, n, errno, false);
    return n > 0 ? n : -1;
}

/* Reads what has arrived without waiting: > 0 bytes, 0 when nothing (for
 * TLS: nothing but TLS's own messages), -1 failed. */
static ssize_t read_now(valkey_transport_t *t, char *buf, size_t cap)
{
    if (t->ssl == NULL) {
        ssize_t n;
        do
            n = recv(t->fd, buf, cap, MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            io_failed(t, 0, n < 0 ? errno : 0, n == 0);
        return n > 0 ? n : -1;
    }
    /* SSL_read has no flag for it: the socket is non-blocking meanwhile */
    int flags = fcntl(t->fd, F_GETFL);
    if (flags < 0 || fcntl(t->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        t->failed = true;
        snprintf(t->errstr, sizeof t->errstr, "%s", strerror(errno));
        return -1;
    }
    ERR_clear_error();
    errno = 0;
    int n = SSL_read(t->ssl, buf, (int)cap);
    int sys = errno;
    int e = n > 0 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, n);
    (void)fcntl(t->fd, F_SETFL, flags);
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (n <= 0)
        io_failed(t, n, sys, false);
    return n > 0 ? n : -1;
}

static bool write_all(valkey_transport_t *t, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w;
        if (t->ssl == NULL) {
            do
                w = send(t->fd, p, n, MSG_NOSIGNAL);
            while (w < 0 && errno == EINTR);
            if (w < 0) {
                io_failed(t, 0, errno, false);
                return false;
            }
        } else {
            ERR_clear_error();
            errno = 0;
            int r = SSL_write(t->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
            if (r <= 0) {
                io_failed(t, r, errno, false);
                return false;
            }
            w = r;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool valkey_transport_set_timeout(valkey_transport_t *t, int64_t ms)
{
    if (ms < 1)
        ms = 1;
    /* Each call sets the budget left of its deadline, in whole ms; calls
     * with the same deadline class and a fast path mostly ask for the value
     * the socket already has, and two setsockopt calls a request were
     * system calls for nothing (docs/benchmarks.md, "leased on Valkey"). */
    if (ms == t->timeout_ms)
        return true;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    bool ok = setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
              setsockopt(t->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
    t->timeout_ms = ok ? ms : 0; /* after a failure, either may be set: not known */
    return ok;
}

/* Why the handshake failed, in the operator's terms. */
static void handshake_failed(valkey_transport_t *t, const char *host, int port, int rc, char *err,
                             size_t errlen)
{
    long v = SSL_get_verify_result(t->ssl);
    if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
        valkey_set_err(
            err, errlen,
            "TLS to %s:%d: the server's certificate does not name %s (%s): the URL must use "
            "a name the certificate carries",
            host, port, host, X509_verify_cert_error_string(v));
    else if (v != X509_V_OK)
        valkey_set_err(
            err, errlen,
            "TLS to %s:%d: the server's certificate is not trusted (%s): LEASE_STORE_CACERT "
            "names the CA that signed it (empty: the system's CAs)",
            host, port, X509_verify_cert_error_string(v));
    else {
        io_failed(t, rc, errno, false);
        valkey_set_err(err, errlen,
                       "TLS handshake with %s:%d failed: %s (is it the server's TLS port?)", host,
                       port, t->errstr);
    }
}

/* The TLS session over t->fd: the server's certificate checked against the
 * CA file (or the system's CAs) and against host; a client certificate when
 * one is set. */
static bool tls_start(valkey_transport_t *t, const char *host, int port, const valkey_tls_t *tls,
                      char *err, size_t errlen)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        valkey_set_err(err, errlen, "TLS: %s", ssl_reason());
        return false;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    bool ok = tls->ca_file[0] ? SSL_CTX_load_verify_locations(ctx, tls->ca_file, NULL) == 1
                              : SSL_CTX_set_default_verify_paths(ctx) == 1;
    if (!ok)
        valkey_set_err(err, errlen, "TLS: cannot load the CA certificates %s: %s",
                       tls->ca_file[0] ? tls->ca_file : "(the system's)", ssl_reason());
    if (ok && tls->cert_file[0]) {
        ok = SSL_CTX_use_certificate_chain_file(ctx, tls->cert_file) == 1 &&
             SSL_CTX_use_PrivateKey_file(ctx, tls->key_file, SSL_FILETYPE_PEM) == 1 &&
             SSL_CTX_check_private_key(ctx) == 1;
        if (!ok)
            valkey_set_err(err, errlen,
                           "TLS: cannot use the client certificate %s with the key %s: %s",
                           tls->cert_file, tls->key_file, ssl_reason());
    }
    if (ok)
        t->ssl = SSL_new(ctx);
    t->client_cert = tls->cert_file[0] != '\0';
    SSL_CTX_free(ctx); /* the session holds its own reference */
    if (!ok)
        return false;
    if (t->ssl == NULL || SSL_set_fd(t->ssl, t->fd) != 1) {
        valkey_set_err(err, errlen, "TLS: %s", ssl_reason());
        return false;
    }
    /* an address is checked against the certificate's IP names, a DNS name
     * against its DNS names, and only a DNS name is sent as SNI (RFC 6066) */
    unsigned char addr[16];
    bool is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    /* SSL_set_tlsext_host_name is a macro that casts its name to void *:
     * a copy, so no const is cast away (clang's -Wcast-qual) */
    char sni[256];
    int sni_n = snprintf(sni, sizeof sni, "%s", host);
    ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host) == 1
               : sni_n > 0 && (size_t)sni_n < sizeof sni &&
                     SSL_set_tlsext_host_name(t->ssl, sni) == 1 && SSL_set1_host(t->ssl, host) == 1;
    if (!ok) {
        valkey_set_err(err, errlen, "TLS: cannot check the certificate against %s: %s", host,
                       ssl_reason());
        return false;
    }
    ERR_clear_error();
    errno = 0;
    int rc = SSL_connect(t->ssl); /* bounded by the socket's timeouts */
    if (rc != 1) {
        handshake_failed(t, host, port, rc, err, errlen);
        return false;
    }
    return true;
}

void valkey_reply_free(redisReply *r)
{
    if (r == NULL)
        return;
    reply_block_t *b = (reply_block_t *)((unsigned char *)r - offsetof(reply_block_t, data));
    while (b) {
        reply_block_t *next = b->next;
        free(b);
        b = next;
    }
}

static void free_reply_object(void *r)
{
    valkey_reply_free(r);
}

/* n bytes (aligned for any object) in the reply being read; the top object
 * (first) opens a new chain. NULL when out of memory: the reader then fails
 * the reply and frees what it has (free_reply_object on the top object). */
static void *reply_alloc(const redisReadTask *task, size_t n)
{
    valkey_transport_t *t = task->privdata;
    n = (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
    reply_block_t *b = task->parent == NULL ? NULL : t->building;
    if (b == NULL || b->cap - b->used < n) {
        size_t cap = n > REPLY_BLOCK ? n : REPLY_BLOCK;
        reply_block_t *nb = malloc(sizeof *nb + cap);
        if (nb == NULL)
            return NULL;
        *nb = (reply_block_t){.next = NULL, .used = 0, .cap = cap};
        if (b != NULL)
            b->next = nb;
        t->building = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

/* A new object of type (and extra bytes after it) linked into its parent
 * array, as hiredis' createReplyObject and its create functions do. */
static redisReply *reply_object(const redisReadTask *task, int type, size_t extra)
{
    redisReply *r = reply_alloc(task, sizeof *r + extra);
    if (r == NULL)
        return NULL;
    memset(r, 0, sizeof *r);
    r->type = type;
    if (task->parent != NULL) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    if (len > SIZE_MAX - sizeof(redisReply) - alignof(max_align_t) - 1)
        return NULL;
    redisReply *r = reply_object(task, task->type, len + 1);
    if (r == NULL)
        return NULL;
    r->str = (char *)(r + 1);
    memcpy(r->str, str, len);
    r->str[len] = '\0';
    r->len = len;
    return r;
}

static void *create_array(const redisReadTask *task, int elements)
{
    size_t n = elements > 0 ? (size_t)elements : 0;
    if (n > (SIZE_MAX - sizeof(redisReply) - alignof(max_align_t)) / sizeof(redisReply *))
        return NULL;
    redisReply *r = reply_object(task, REDIS_REPLY_ARRAY, n * sizeof(redisReply *));
    if (r == NULL)
        return NULL;
    r->elements = n;
    r->element = n > 0 ? (redisReply **)(r + 1) : NULL;
    return r;
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redisReply *r = reply_object(task, REDIS_REPLY_INTEGER, 0);
    if (r != NULL)
        r->integer = value;
    return r;
}

static void *create_nil(const redisReadTask *task)
{
    return reply_object(task, REDIS_REPLY_NIL, 0);
}

static redisReplyObjectFunctions reply_functions = {
    create_string, create_array, create_integer, create_nil, free_reply_object,
};

valkey_transport_t *valkey_transport_connect(const char *host, int port, int64_t timeout_ms,
                                             const valkey_tls_t *tls, char *err, size_t errlen)
{
    if (timeout_ms < 1)
        timeout_ms = 1;
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    /* hiredis' connect (address lookup, a bounded non-blocking connect,
     * TCP_NODELAY), then its socket is ours */
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c == NULL || c->err) {
        valkey_set_err(err, errlen, "cannot connect to %s:%d: %s", host, port,
                       c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    valkey_transport_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        redisFree(c);
        valkey_set_err(err, errlen, "out of memory");
        return NULL;
    }
    t->fd = redisFreeKeepFd(c);
    t->reader = redisReaderCreateWithFunctions(&reply_functions);
    if (t->reader != NULL)
        t->reader->privdata = t; /* each read task's privdata: reply_alloc's transport */
    if (t->reader == NULL || !valkey_transport_set_timeout(t, timeout_ms)) {
        valkey_set_err(err, errlen, "cannot connect to %s:%d: %s", host, port,
                       t->reader ? strerror(errno) : "out of memory");
        valkey_transport_free(t);
        return NULL;
    }
    if (tls != NULL && tls->on && !tls_start(t, host, port, tls, err, errlen)) {
        t->failed = true; /* no session to close */
        valkey_transport_free(t);
        return NULL;
    }
    return t;
}

void valkey_transport_free(valkey_transport_t *t)
{
    if (t == NULL)
        return;
    if (t->ssl) {
        if (!t->failed)
            (void)SSL_shutdown(t->ssl); /* close_notify, without waiting for the server's */
        SSL_free(t->ssl);
    }
    if (t->reader)
        redisReaderFree(t->reader);
    free(t->out);
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

/* The next reply, reading until it is complete. */
static redisReply *read_reply_until_complete(valkey_transport_t *t)
{
    for (;;) {
        void *r = NULL;
        if (redisReaderGetReply(t->reader, &r) != REDIS_OK) {
            t->failed = true;
            snprintf(t->errstr, sizeof t->errstr, "protocol error: %s", t->reader->errstr);
            return NULL;
        }
        if (r != NULL) {
            t->answered = true;
            return r;
        }
        char buf[READ_CHUNK];
        ssize_t n = read_some(t, buf, sizeof buf);
        if (n < 0)
            return NULL;
        if (redisReaderFeed(t->reader, buf, (size_t)n) != REDIS_OK) {
            t->failed = true;
            snprintf(t->errstr, sizeof t->errstr, "out of memory");
            return NULL;
        }
    }
}

/* A failure before the first answer has a likely cause, said so: a plain
 * connection to a TLS-only port (which ends the session at the first bytes
 * that are not TLS), or a TLS session without a client certificate to a
 * server that asks for one (TLS 1.3 tells the client after its handshake:
 * an alert, or a reset that overtakes it). */
static void hint_first_failure(valkey_transport_t *t)
{
    if (t->answered || (t->ssl && t->client_cert))
        return;
    size_t n = strlen(t->errstr);
    snprintf(t->errstr + n, sizeof t->errstr - n, "%s",
             t->ssl ? " (does the server ask for a client certificate? LEASE_STORE_CERT and "
                      "LEASE_STORE_KEY)"
                    : " (a TLS port? then the URL is rediss://)");
}

/* The next reply; a failure on a plain connection before any answer
 * names the likely cause. */
static redisReply *read_reply(valkey_transport_t *t)
{
    redisReply *r = read_reply_until_complete(t);
    if (r == NULL)
        hint_first_failure(t);
    return r;
}

/* Sends cmd (len bytes, already in the protocol) and reads its reply. */
static redisReply *send_and_read(valkey_transport_t *t, const char *cmd, int len)
{
    redisReply *r = NULL;
    if (len < 0)
        snprintf(t->errstr, sizeof t->errstr, "cannot format the command");
    else if (t->failed)
        ; /* errstr says why already */
    else if (write_all(t, cmd, (size_t)len))
        r = read_reply(t);
    else
        hint_first_failure(t);
    return r;
}

/* send_and_read of a command hiredis formatted (freed here). */
static redisReply *round_trip(valkey_transport_t *t, char *cmd, int len)
{
    redisReply *r = send_and_read(t, cmd, len);
    redisFreeCommand(cmd);
    return r;
}

redisReply *valkey_transport_command(valkey_transport_t *t, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    return round_trip(t, cmd, len);
}

/* "<prefix><n>\r\n" at p (prefix '*' or '$'); the end of what was written. */
static char *put_count(char *p, char prefix, size_t n)
{
    char digits[24];
    size_t k = 0;
    do {
        digits[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    *p++ = prefix;
    while (k > 0)
        *p++ = digits[--k];
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/*
 * The command in the protocol, as redisFormatCommandArgv writes it (an
 * array of bulk strings: *argc, then $len and the bytes of each), into a
 * buffer the transport keeps: hiredis' formatting cost a malloc, an
 * sprintf per argument and a free, ~3 k instructions of every FCALL
 * (docs/benchmarks.md, "leased on Valkey"). Its length, or -1 when out of
 * memory.
 */
static int format_argv(valkey_transport_t *t, int argc, const char **argv, const size_t *argvlen)
{
    if (argc < 0)
        return -1;
    /* each count line: a prefix, at most 20 digits, CRLF */
    size_t need = 24;
    for (int i = 0; i < argc; i++) {
        size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
        if (n > (size_t)INT_MAX - need - 26)
            return -1;
        need += 24 + n + 2;
    }
    if (need > (size_t)INT_MAX)
        return -1;
    if (need > t->out_cap) {
        char *grown = realloc(t->out, need);
        if (grown == NULL)
            return -1;
        t->out = grown;
        t->out_cap = need;
    }
    char *p = put_count(t->out, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
        p = put_count(p, '$', n);
        memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    return (int)(p - t->out);
}

redisReply *valkey_transport_command_argv(valkey_transport_t *t, int argc, const char **argv,
                                          const size_t *argvlen)
{
    return send_and_read(t, t->out, format_argv(t, argc, argv, argvlen));
}

int valkey_transport_fd(const valkey_transport_t *t)
{
    return t->fd;
}

bool valkey_transport_read_available(valkey_transport_t *t)
{
    if (t->failed)
        return false;
    /* one read, as redisBufferRead: what came before a close is handed out
     * before the close is seen at the next poll; a TLS record is read whole
     * (READ_CHUNK), so what is left waits in the socket, which polls readable */
    char buf[READ_CHUNK];
    ssize_t n = read_now(t, buf, sizeof buf);
    if (n < 0)
        return false;
    if (n > 0 && redisReaderFeed(t->reader, buf, (size_t)n) != REDIS_OK) {
        t->failed = true;
        snprintf(t->errstr, sizeof t->errstr, "out of memory");
        return false;
    }
    return true;
}

bool valkey_transport_next_reply(valkey_transport_t *t, redisReply **reply)
{
    void *r = NULL;
    *reply = NULL;
    if (redisReaderGetReply(t->reader, &r) != REDIS_OK) {
        t->failed = true;
        snprintf(t->errstr, sizeof t->errstr, "protocol error: %s", t->reader->errstr);
        return false;
    }
    *reply = r;
    return true;
}

bool valkey_transport_closed_while_idle(valkey_transport_t *t)
{
    struct pollfd p = {.fd = t->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) == 0)
        return false;
    /* TLS may have sent a message of its own (a session ticket): that is
     * read and the connection kept; anything else is not expected (an idle
     * connection has nothing to read) */
    char buf[READ_CHUNK];
    bool closed = (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) || t->ssl == NULL ||
                  read_now(t, buf, sizeof buf) != 0;
    t->failed |= closed; /* no close_notify into a closed socket at free */
    return closed;
}

const char *valkey_transport_error(const valkey_transport_t *t)
{
    return t->errstr[0] ? t->errstr : "no error";
}
