/*
 * testbroker.c - the fixture broker's state, its control script, and a
 * consumer (librabbitmq).
 */
#include "testbroker.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>

#include "state_file.h"

static char state_url[512];
static char state_tls_dir[512];
static int state_tls_port;
static bool state_owned;
static bool state_loaded;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "testbroker: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void take(const char *key, const char *val, void *arg)
{
    (void)arg;
    if (strcmp(key, "RMQ_URL") == 0)
        snprintf(state_url, sizeof state_url, "%s", val);
    else if (strcmp(key, "RMQ_OWNED") == 0)
        state_owned = strcmp(val, "1") == 0;
    else if (strcmp(key, "RMQ_TLS_DIR") == 0)
        snprintf(state_tls_dir, sizeof state_tls_dir, "%s", val);
    else if (strcmp(key, "RMQ_TLS_PORT") == 0)
        state_tls_port = atoi(val);
}

static void load_state(void)
{
    if (state_loaded)
        return;
    state_file_read(LEASE_TEST_RABBIT_STATE_FILE, "rabbit_setup", take, NULL);
    if (!state_url[0])
        die("incomplete state file %s", LEASE_TEST_RABBIT_STATE_FILE);
    state_loaded = true;
}

const char *testbroker_url(void)
{
    load_state();
    return state_url;
}

int testbroker_tls_port(void)
{
    load_state();
    return state_tls_port;
}

const char *testbroker_tls_dir(void)
{
    load_state();
    return state_tls_dir;
}

bool testbroker_owned(void)
{
    load_state();
    return state_owned;
}

static bool script(const char *cmd)
{
    char line[1024];
    snprintf(line, sizeof line, "'%s' %s '%s'", LEASE_TEST_RABBITCLUSTER, cmd,
             LEASE_TEST_RABBIT_STATE_FILE);
    int rc = system(line);
    if (rc != 0)
        fprintf(stderr, "testbroker: rabbitcluster %s failed (%d)\n", cmd, rc);
    return rc == 0;
}

bool testbroker_pause(void)
{
    return script("pause");
}

bool testbroker_resume(void)
{
    return script("resume");
}

bool testbroker_freeze(void)
{
    return script("freeze");
}

bool testbroker_thaw(void)
{
    return script("thaw");
}

void testbroker_dump_log(void)
{
    fprintf(stderr, "---- rabbitmq log ----\n");
    fflush(stderr);
    (void)script("log");
    fprintf(stderr, "---- end of rabbitmq log ----\n");
}

/* ------------------------------------------------------------------ */

struct testbroker_consumer {
    char *exchange, *binding_key, *queue;
    amqp_connection_state_t conn; /* NULL while disconnected */
};

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static bool rpc_ok(amqp_connection_state_t conn, const char *what, bool quiet)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return true;
    if (!quiet)
        fprintf(stderr, "testbroker: %s failed (reply type %d, library error %s)\n", what,
                r.reply_type, amqp_error_string2(r.library_error));
    return false;
}

/* A connection with channel 1 open; NULL when the broker is unreachable. */
static amqp_connection_state_t open_conn(bool quiet)
{
    char url[512];
    snprintf(url, sizeof url, "%s", testbroker_url());
    struct amqp_connection_info info;
    amqp_default_connection_info(&info);
    if (amqp_parse_url(url, &info) != AMQP_STATUS_OK)
        die("bad broker url");
    if (!info.vhost || !*info.vhost)
        info.vhost = "/";
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = amqp_tcp_socket_new(conn);
    struct timeval tv = {5, 0};
    if (amqp_socket_open_noblock(sock, info.host, info.port, &tv) != AMQP_STATUS_OK) {
        amqp_destroy_connection(conn);
        return NULL;
    }
    amqp_set_rpc_timeout(conn, &tv);
    amqp_rpc_reply_t r = amqp_login(conn, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
                                    info.user, info.password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        if (!quiet)
            fprintf(stderr, "testbroker: login failed\n");
        amqp_destroy_connection(conn);
        return NULL;
    }
    amqp_channel_open(conn, 1);
    if (!rpc_ok(conn, "channel.open", quiet)) {
        amqp_destroy_connection(conn);
        return NULL;
    }
    return conn;
}

static bool declare(amqp_connection_state_t conn, const char *exchange, const char *queue,
                    const char *binding_key)
{
    if (*exchange) {
        amqp_exchange_declare(conn, 1, amqp_cstring_bytes(exchange), amqp_cstring_bytes("topic"), 0,
                              1, 0, 0, amqp_empty_table);
        if (!rpc_ok(conn, "exchange.declare", false))
            return false;
    }
    if (!queue)
        return true;
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(queue), 0, 1, 0, 0, amqp_empty_table);
    if (!rpc_ok(conn, "queue.declare", false))
        return false;
    if (*exchange) {
        amqp_queue_bind(conn, 1, amqp_cstring_bytes(queue), amqp_cstring_bytes(exchange),
                        amqp_cstring_bytes(binding_key), amqp_empty_table);
        if (!rpc_ok(conn, "queue.bind", false))
            return false;
    }
    return true;
}

void testbroker_declare(const char *exchange, const char *queue, const char *binding_key)
{
    amqp_connection_state_t conn = open_conn(false);
    if (!conn)
        die("cannot connect to the broker");
    if (!declare(conn, exchange, queue, binding_key))
        die("cannot declare %s / %s", exchange, queue ? queue : "-");
    amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

static bool consumer_connect(testbroker_consumer_t *c, bool quiet)
{
    c->conn = open_conn(quiet);
    if (!c->conn)
        return false;
    if (!declare(c->conn, c->exchange, c->queue, c->binding_key))
        goto fail;
    /* acknowledged one by one after reading: a message in flight when the
     * broker goes away is delivered again, never lost */
    amqp_basic_qos(c->conn, 1, 0, 1000, 0);
    if (!rpc_ok(c->conn, "basic.qos", quiet))
        goto fail;
    amqp_basic_consume(c->conn, 1, amqp_cstring_bytes(c->queue), amqp_empty_bytes, 0, 0, 0,
                       amqp_empty_table);
    if (!rpc_ok(c->conn, "basic.consume", quiet))
        goto fail;
    return true;
fail:
    amqp_destroy_connection(c->conn);
    c->conn = NULL;
    return false;
}

testbroker_consumer_t *testbroker_consumer_new(const char *exchange, const char *binding_key,
                                               const char *queue)
{
    testbroker_consumer_t *c = calloc(1, sizeof *c);
    c->exchange = strdup(exchange);
    c->binding_key = strdup(binding_key);
    c->queue = strdup(queue);
    if (!consumer_connect(c, false))
        die("cannot consume from %s", queue);
    return c;
}

static char *dup_bytes(amqp_bytes_t b)
{
    char *s = malloc(b.len + 1);
    memcpy(s, b.bytes, b.len);
    s[b.len] = '\0';
    return s;
}

static char *field_text(const amqp_field_value_t *v)
{
    char buf[64];
    switch (v->kind) {
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
        return dup_bytes(v->value.bytes);
    case AMQP_FIELD_KIND_I64:
        snprintf(buf, sizeof buf, "%" PRId64, v->value.i64);
        return strdup(buf);
    case AMQP_FIELD_KIND_I32:
        snprintf(buf, sizeof buf, "%" PRId32, v->value.i32);
        return strdup(buf);
    default:
        snprintf(buf, sizeof buf, "<kind %c>", v->kind);
        return strdup(buf);
    }
}

static testbroker_msg_t *from_envelope(const amqp_envelope_t *e)
{
    testbroker_msg_t *m = calloc(1, sizeof *m);
    const amqp_basic_properties_t *p = &e->message.properties;
    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        m->message_id = dup_bytes(p->message_id);
    if (p->_flags & AMQP_BASIC_TYPE_FLAG)
        m->type = dup_bytes(p->type);
    if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
        m->content_type = dup_bytes(p->content_type);
    if (p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG)
        m->correlation_id = dup_bytes(p->correlation_id);
    if (p->_flags & AMQP_BASIC_APP_ID_FLAG)
        m->app_id = dup_bytes(p->app_id);
    if (p->_flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        m->delivery_mode = p->delivery_mode;
    if (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG)
        m->timestamp = p->timestamp;
    if (p->_flags & AMQP_BASIC_HEADERS_FLAG) {
        m->n_headers = (size_t)p->headers.num_entries;
        m->header_names = calloc(m->n_headers + 1, sizeof *m->header_names);
        m->header_values = calloc(m->n_headers + 1, sizeof *m->header_values);
        for (size_t i = 0; i < m->n_headers; i++) {
            m->header_names[i] = dup_bytes(p->headers.entries[i].key);
            m->header_values[i] = field_text(&p->headers.entries[i].value);
        }
    }
    m->body = dup_bytes(e->message.body);
    m->body_len = e->message.body.len;
    m->redelivered = e->redelivered;
    m->routing_key = dup_bytes(e->routing_key);
    m->exchange = dup_bytes(e->exchange);
    return m;
}

testbroker_msg_t *testbroker_next(testbroker_consumer_t *c, int timeout_ms)
{
    long end = now_ms() + timeout_ms;
    for (;;) {
        long left = end - now_ms();
        if (left <= 0)
            return NULL;
        if (!c->conn) {
            if (!consumer_connect(c, true)) {
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        struct timeval tv = {left / 1000, (left % 1000) * 1000};
        amqp_envelope_t e;
        amqp_maybe_release_buffers(c->conn);
        amqp_rpc_reply_t r = amqp_consume_message(c->conn, &e, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
            testbroker_msg_t *m = from_envelope(&e);
            (void)amqp_basic_ack(c->conn, 1, e.delivery_tag, 0);
            amqp_destroy_envelope(&e);
            return m;
        }
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_TIMEOUT)
            return NULL;
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            /* a frame other than a delivery (a close): read it, then reconnect */
            amqp_frame_t f;
            struct timeval zero = {0, 0};
            (void)amqp_simple_wait_frame_noblock(c->conn, &f, &zero);
        }
        amqp_destroy_connection(c->conn);
        c->conn = NULL;
    }
}

long testbroker_queue_depth(testbroker_consumer_t *c)
{
    amqp_connection_state_t conn = open_conn(true);
    if (!conn)
        return -1;
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(conn, 1, amqp_cstring_bytes(c->queue), 1, 0, 0, 0, amqp_empty_table);
    long depth = ok ? (long)ok->message_count : -1;
    amqp_destroy_connection(conn);
    return depth;
}

void testbroker_consumer_free(testbroker_consumer_t *c)
{
    if (!c)
        return;
    if (c->conn)
        amqp_destroy_connection(c->conn);
    amqp_connection_state_t conn = open_conn(true);
    if (conn) {
        amqp_queue_delete(conn, 1, amqp_cstring_bytes(c->queue), 0, 0);
        (void)rpc_ok(conn, "queue.delete", true);
        amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
        amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
        amqp_destroy_connection(conn);
    }
    free(c->exchange);
    free(c->binding_key);
    free(c->queue);
    free(c);
}

const char *testbroker_msg_header(const testbroker_msg_t *m, const char *name)
{
    for (size_t i = 0; i < m->n_headers; i++)
        if (strcmp(m->header_names[i], name) == 0)
            return m->header_values[i];
    return NULL;
}

void testbroker_msg_free(testbroker_msg_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_headers; i++) {
        free(m->header_names[i]);
        free(m->header_values[i]);
    }
    free(m->header_names);
    free(m->header_values);
    free(m->message_id);
    free(m->type);
    free(m->content_type);
    free(m->correlation_id);
    free(m->app_id);
    free(m->body);
    free(m->routing_key);
    free(m->exchange);
    free(m);
}
