/*
 * relay_amqp.c - librabbitmq: connect, confirm mode, publish, settle.
 *
 * librabbitmq is not thread-safe per connection; the relay uses its
 * connection from one thread only. Heartbeats are serviced only inside
 * library calls, so the relay's idle loop calls relay_amqp_service.
 */
#include "relay_amqp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <openssl/crypto.h>
#include <openssl/x509.h>
#include <unistd.h>

#include "lease/clock.h"

#define RELAY_AMQP_CHANNEL 1
#define RELAY_AMQP_HEARTBEAT_S 30
#define RELAY_AMQP_FRAME_MAX 131072
#define RELAY_AMQP_MAX_HEADERS 24

struct relay_amqp {
    char *url_buf; /* amqp_parse_url points into it */
    struct amqp_connection_info info;
    char endpoint[300];
    char *cacert; /* amqps: the CA file; NULL: the system's */
    char *cert;   /* amqps: client certificate and key, or NULL */
    char *key;
    amqp_connection_state_t conn; /* NULL when disconnected */
    uint64_t next_tag;            /* the tag the next publish gets */
};

static bool set(const char *v)
{
    return v && *v;
}

/* A TLS file the relay will read at every connect: readable now, so a typo
 * is a bad setting at start rather than a broker that never comes up. */
static bool tls_file(const char *setting, const char *path, char **out, char *err, size_t errsz)
{
    if (access(path, R_OK) != 0) {
        snprintf(err, errsz, "%s: cannot read %s", setting, path);
        return false;
    }
    if (!(*out = strdup(path))) {
        snprintf(err, errsz, "out of memory");
        return false;
    }
    return true;
}

static bool take_tls(relay_amqp_t *a, const relay_amqp_tls_t *tls, char *err, size_t errsz)
{
    bool any = tls && (set(tls->cacert) || set(tls->cert) || set(tls->key));
    if (!any)
        return true;
    if (!a->info.ssl) {
        snprintf(err, errsz,
                 "LEASE_RELAY_AMQP_CACERT, _CERT and _KEY are for amqps:// URLs; the AMQP url "
                 "is amqp:// (no TLS)");
        return false;
    }
    if (set(tls->cert) != set(tls->key)) {
        snprintf(err, errsz,
                 "a client certificate needs both LEASE_RELAY_AMQP_CERT and LEASE_RELAY_AMQP_KEY");
        return false;
    }
    if (set(tls->cacert) &&
        !tls_file("LEASE_RELAY_AMQP_CACERT", tls->cacert, &a->cacert, err, errsz))
        return false;
    if (set(tls->cert) && (!tls_file("LEASE_RELAY_AMQP_CERT", tls->cert, &a->cert, err, errsz) ||
                           !tls_file("LEASE_RELAY_AMQP_KEY", tls->key, &a->key, err, errsz)))
        return false;
    return true;
}

relay_amqp_t *relay_amqp_new(const char *url, const relay_amqp_tls_t *tls, char *err, size_t errsz)
{
    relay_amqp_t *a = calloc(1, sizeof *a);
    if (!a || !(a->url_buf = strdup(url))) {
        free(a);
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    amqp_default_connection_info(&a->info);
    if (amqp_parse_url(a->url_buf, &a->info) != AMQP_STATUS_OK) {
        snprintf(err, errsz, "AMQP url: not amqp:// or amqps://user:password@host:port/vhost");
        relay_amqp_free(a);
        return NULL;
    }
    if (!take_tls(a, tls, err, errsz)) {
        relay_amqp_free(a);
        return NULL;
    }
    if (!a->info.vhost || !*a->info.vhost)
        a->info.vhost = "/";
    snprintf(a->endpoint, sizeof a->endpoint, "%s:%d%s", a->info.host, a->info.port,
             a->info.ssl ? " (TLS)" : "");
    return a;
}

const char *relay_amqp_endpoint(const relay_amqp_t *a)
{
    return a->endpoint;
}

void relay_amqp_disconnect(relay_amqp_t *a, bool graceful)
{
    if (!a->conn)
        return;
    if (graceful) {
        amqp_channel_close(a->conn, RELAY_AMQP_CHANNEL, AMQP_REPLY_SUCCESS);
        amqp_connection_close(a->conn, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(a->conn);
    a->conn = NULL;
}

void relay_amqp_free(relay_amqp_t *a)
{
    if (!a)
        return;
    relay_amqp_disconnect(a, false);
    if (a->url_buf) {
        OPENSSL_cleanse(a->url_buf, strlen(a->url_buf));
        free(a->url_buf);
    }
    free(a->cacert);
    free(a->cert);
    free(a->key);
    free(a);
}

bool relay_amqp_connected(const relay_amqp_t *a)
{
    return a->conn != NULL;
}

/* A failed RPC's reason, one line. */
static void rpc_error(amqp_rpc_reply_t r, const char *what, char *err, size_t errsz)
{
    switch (r.reply_type) {
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        snprintf(err, errsz, "%s: %s", what, amqp_error_string2(r.library_error));
        return;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            const amqp_connection_close_t *c = r.reply.decoded;
            snprintf(err, errsz, "%s: connection closed by the broker: %d %.*s", what,
                     c->reply_code, (int)c->reply_text.len, (const char *)c->reply_text.bytes);
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            const amqp_channel_close_t *c = r.reply.decoded;
            snprintf(err, errsz, "%s: channel closed by the broker: %d %.*s", what, c->reply_code,
                     (int)c->reply_text.len, (const char *)c->reply_text.bytes);
        } else {
            snprintf(err, errsz, "%s: broker error (method 0x%08X)", what, r.reply.id);
        }
        return;
    case AMQP_RESPONSE_NONE:
        snprintf(err, errsz, "%s: no reply", what);
        return;
    case AMQP_RESPONSE_NORMAL:
        break;
    }
    snprintf(err, errsz, "%s: failed", what);
}

static struct timeval tv_ms(int64_t ms)
{
    if (ms < 0)
        ms = 0;
    return (struct timeval){.tv_sec = (time_t)(ms / 1000),
                            .tv_usec = (suseconds_t)(ms % 1000) * 1000};
}

/* A TLS socket that verifies the broker: its chain against the CA file
 * (the system's CAs by default) and its name against the URL's host. */
static amqp_socket_t *tls_socket(relay_amqp_t *a, char *err, size_t errsz)
{
    amqp_socket_t *sock = amqp_ssl_socket_new(a->conn);
    if (!sock) {
        snprintf(err, errsz, "TLS: cannot create a socket");
        return NULL;
    }
    amqp_ssl_socket_set_verify_peer(sock, 1);
    amqp_ssl_socket_set_verify_hostname(sock, 1);
    const char *ca = a->cacert ? a->cacert : X509_get_default_cert_file();
    int st = amqp_ssl_socket_set_cacert(sock, ca);
    if (st != AMQP_STATUS_OK) {
        snprintf(err, errsz, "TLS: CA file %s: %s", ca, amqp_error_string2(st));
        return NULL;
    }
    if (a->cert) {
        st = amqp_ssl_socket_set_key(sock, a->cert, a->key);
        if (st != AMQP_STATUS_OK) {
            snprintf(err, errsz, "TLS: client certificate %s with key %s: %s", a->cert, a->key,
                     amqp_error_string2(st));
            return NULL;
        }
    }
    return sock;
}

bool relay_amqp_connect(relay_amqp_t *a, const char *const *exchanges, size_t n_exchanges,
                        bool declare, int64_t timeout_ms, char *err, size_t errsz)
{
    relay_amqp_disconnect(a, false);
    a->conn = amqp_new_connection();
    if (!a->conn) {
        snprintf(err, errsz, "out of memory");
        return false;
    }
    amqp_socket_t *sock = NULL;
    if (a->info.ssl)
        sock = tls_socket(a, err, errsz);
    else if (!(sock = amqp_tcp_socket_new(a->conn)))
        snprintf(err, errsz, "out of memory");
    if (!sock) {
        relay_amqp_disconnect(a, false);
        return false;
    }
    struct timeval tv = tv_ms(timeout_ms);
    int st = amqp_socket_open_noblock(sock, a->info.host, a->info.port, &tv);
    if (st != AMQP_STATUS_OK) {
        if (st == AMQP_STATUS_SSL_PEER_VERIFY_FAILED ||
            st == AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED)
            snprintf(err, errsz,
                     "connect %s: %s (the broker's certificate is not trusted: "
                     "LEASE_RELAY_AMQP_CACERT names the CA that signed it; the certificate "
                     "must name the host %s)",
                     a->endpoint, amqp_error_string2(st), a->info.host);
        else
            snprintf(err, errsz, "connect %s: %s", a->endpoint, amqp_error_string2(st));
        relay_amqp_disconnect(a, false);
        return false;
    }
    amqp_set_handshake_timeout(a->conn, &tv);
    amqp_set_rpc_timeout(a->conn, &tv);
    amqp_rpc_reply_t r =
        amqp_login(a->conn, a->info.vhost, 0, RELAY_AMQP_FRAME_MAX, RELAY_AMQP_HEARTBEAT_S,
                   AMQP_SASL_METHOD_PLAIN, a->info.user, a->info.password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        rpc_error(r, "login", err, errsz);
        goto fail;
    }
    amqp_channel_open(a->conn, RELAY_AMQP_CHANNEL);
    r = amqp_get_rpc_reply(a->conn);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        rpc_error(r, "channel.open", err, errsz);
        goto fail;
    }
    amqp_confirm_select(a->conn, RELAY_AMQP_CHANNEL);
    r = amqp_get_rpc_reply(a->conn);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        rpc_error(r, "confirm.select", err, errsz);
        goto fail;
    }
    for (size_t i = 0; i < n_exchanges; i++) {
        if (!*exchanges[i])
            continue; /* the default exchange always exists */
        amqp_exchange_declare(a->conn, RELAY_AMQP_CHANNEL, amqp_cstring_bytes(exchanges[i]),
                              amqp_cstring_bytes("topic"), declare ? 0 : 1, 1, 0, 0,
                              amqp_empty_table);
        r = amqp_get_rpc_reply(a->conn);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            char what[200];
            snprintf(what, sizeof what, "exchange.declare %s", exchanges[i]);
            rpc_error(r, what, err, errsz);
            goto fail;
        }
    }
    a->next_tag = 1;
    return true;
fail:
    relay_amqp_disconnect(a, false);
    return false;
}

uint64_t relay_amqp_publish(relay_amqp_t *a, const relay_amqp_message_t *m, char *err, size_t errsz,
                            bool *invalid)
{
    *invalid = false;
    if (!a->conn) {
        snprintf(err, errsz, "not connected");
        return 0;
    }
    amqp_table_entry_t entries[RELAY_AMQP_MAX_HEADERS];
    size_t n = m->n_headers < RELAY_AMQP_MAX_HEADERS ? m->n_headers : RELAY_AMQP_MAX_HEADERS;
    for (size_t i = 0; i < n; i++) {
        entries[i].key = amqp_cstring_bytes(m->headers[i].name);
        if (m->headers[i].is_int) {
            entries[i].value.kind = AMQP_FIELD_KIND_I64;
            entries[i].value.value.i64 = m->headers[i].num;
        } else {
            entries[i].value.kind = AMQP_FIELD_KIND_UTF8;
            entries[i].value.value.bytes = amqp_cstring_bytes(m->headers[i].str);
        }
    }
    amqp_basic_properties_t props;
    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                   AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_TYPE_FLAG |
                   AMQP_BASIC_APP_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2; /* persistent */
    props.message_id = amqp_cstring_bytes(m->message_id);
    props.timestamp = (uint64_t)(m->timestamp_s > 0 ? m->timestamp_s : 0);
    props.type = amqp_cstring_bytes(m->type);
    props.app_id = amqp_cstring_bytes("leased-relay");
    props.headers.num_entries = (int)n;
    props.headers.entries = entries;
    if (m->correlation_id) {
        props._flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
        props.correlation_id = amqp_cstring_bytes(m->correlation_id);
    }
    amqp_bytes_t body = {m->body_len, (void *)(uintptr_t)m->body};
    int st = amqp_basic_publish(a->conn, RELAY_AMQP_CHANNEL, amqp_cstring_bytes(m->exchange),
                                amqp_cstring_bytes(m->routing_key), 1, 0, &props, body);
    if (st != AMQP_STATUS_OK) {
        snprintf(err, errsz, "publish: %s", amqp_error_string2(st));
        *invalid = st == AMQP_STATUS_BAD_AMQP_DATA || st == AMQP_STATUS_TABLE_TOO_BIG ||
                   st == AMQP_STATUS_INVALID_PARAMETER;
        relay_amqp_disconnect(a, false);
        return 0;
    }
    return a->next_tag++;
}

static void settle(uint64_t first, uint64_t last, relay_settle_t *settles, uint64_t tag,
                   bool multiple, relay_settle_t how)
{
    uint64_t lo = multiple ? first : tag;
    for (uint64_t t = lo; t <= tag && t <= last; t++)
        if (t >= first && settles[t - first] == RELAY_SETTLE_PENDING)
            settles[t - first] = how;
}

/* A method frame the broker sent on its own: closing the channel or the
 * connection. Answers it and reports why in err. */
static void broker_closed(relay_amqp_t *a, const amqp_frame_t *f, char *err, size_t errsz)
{
    if (f->payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const amqp_connection_close_t *c = f->payload.method.decoded;
        snprintf(err, errsz, "the broker closed the connection: %d %.*s", c->reply_code,
                 (int)c->reply_text.len, (const char *)c->reply_text.bytes);
        amqp_connection_close_ok_t ok;
        amqp_send_method(a->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    } else {
        const amqp_channel_close_t *c = f->payload.method.decoded;
        snprintf(err, errsz, "the broker closed the channel: %d %.*s", c->reply_code,
                 (int)c->reply_text.len, (const char *)c->reply_text.bytes);
        amqp_channel_close_ok_t ok;
        amqp_send_method(a->conn, f->channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    }
}

/* Handles one frame; false when the connection is over (err set). */
static bool handle_frame(relay_amqp_t *a, const amqp_frame_t *f, uint64_t first, uint64_t last,
                         relay_settle_t *settles, relay_amqp_return_fn on_return, void *ctx,
                         char *err, size_t errsz)
{
    if (f->frame_type != AMQP_FRAME_METHOD)
        return true; /* a stray header or body frame: nothing of ours */
    switch (f->payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        const amqp_basic_ack_t *ack = f->payload.method.decoded;
        if (settles)
            settle(first, last, settles, ack->delivery_tag, ack->multiple, RELAY_SETTLE_ACKED);
        return true;
    }
    case AMQP_BASIC_NACK_METHOD: {
        const amqp_basic_nack_t *nack = f->payload.method.decoded;
        if (settles)
            settle(first, last, settles, nack->delivery_tag, nack->multiple, RELAY_SETTLE_NACKED);
        return true;
    }
    case AMQP_BASIC_RETURN_METHOD: {
        const amqp_basic_return_t *ret = f->payload.method.decoded;
        int code = ret->reply_code;
        char text[128];
        snprintf(text, sizeof text, "%.*s", (int)ret->reply_text.len,
                 (const char *)ret->reply_text.bytes);
        amqp_message_t msg;
        amqp_rpc_reply_t r = amqp_read_message(a->conn, f->channel, &msg, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            rpc_error(r, "basic.return", err, errsz);
            return false;
        }
        char id[64] = "";
        if (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
            snprintf(id, sizeof id, "%.*s", (int)msg.properties.message_id.len,
                     (const char *)msg.properties.message_id.bytes);
        amqp_destroy_message(&msg);
        if (on_return)
            on_return(ctx, id, code, text);
        return true;
    }
    case AMQP_CONNECTION_CLOSE_METHOD:
    case AMQP_CHANNEL_CLOSE_METHOD:
        broker_closed(a, f, err, errsz);
        return false;
    default:
        return true;
    }
}

static bool all_settled(uint64_t first, uint64_t last, const relay_settle_t *settles)
{
    for (uint64_t t = first; t <= last; t++)
        if (settles[t - first] == RELAY_SETTLE_PENDING)
            return false;
    return true;
}

bool relay_amqp_wait(relay_amqp_t *a, uint64_t first, uint64_t last, relay_settle_t *settles,
                     int64_t deadline_mono_ns, relay_amqp_return_fn on_return, void *ctx, char *err,
                     size_t errsz)
{
    while (a->conn && !all_settled(first, last, settles)) {
        int64_t left_ms = (deadline_mono_ns - lease_mono_now_ns()) / 1000000;
        if (left_ms <= 0) {
            snprintf(err, errsz, "no confirm within the confirm timeout");
            relay_amqp_disconnect(a, false);
            return false;
        }
        struct timeval tv = tv_ms(left_ms);
        amqp_frame_t f;
        int st = amqp_simple_wait_frame_noblock(a->conn, &f, &tv);
        if (st == AMQP_STATUS_TIMEOUT)
            continue;
        if (st != AMQP_STATUS_OK) {
            snprintf(err, errsz, "waiting for confirms: %s", amqp_error_string2(st));
            relay_amqp_disconnect(a, false);
            return false;
        }
        bool ok = handle_frame(a, &f, first, last, settles, on_return, ctx, err, errsz);
        amqp_maybe_release_buffers(a->conn);
        if (!ok) {
            relay_amqp_disconnect(a, false);
            return false;
        }
    }
    if (!a->conn) {
        snprintf(err, errsz, "not connected");
        return false;
    }
    return true;
}

bool relay_amqp_service(relay_amqp_t *a, char *err, size_t errsz)
{
    if (!a->conn)
        snprintf(err, errsz, "not connected");
    while (a->conn) {
        struct timeval tv = {0, 0};
        amqp_frame_t f;
        int st = amqp_simple_wait_frame_noblock(a->conn, &f, &tv);
        if (st == AMQP_STATUS_TIMEOUT)
            return true;
        if (st != AMQP_STATUS_OK) {
            snprintf(err, errsz, "connection: %s", amqp_error_string2(st));
            relay_amqp_disconnect(a, false);
            return false;
        }
        bool ok = handle_frame(a, &f, 0, 0, NULL, NULL, NULL, err, errsz);
        amqp_maybe_release_buffers(a->conn);
        if (!ok) {
            relay_amqp_disconnect(a, false);
            return false;
        }
    }
    return false;
}
