/*
 * fuzz_http_rules.c - the framing rules leased adds to libmicrohttpd's parser
 * (src/server/http_rules.c), fed the way leased feeds them: the input is the
 * bytes a client sends, given to a real libmicrohttpd daemon (no thread of
 * its own, no listening socket: the connection is one end of a socket pair,
 * driven by MHD_run) whose URI log callback runs leased_http_rules_target on
 * the raw target and whose access handler runs leased_http_rules_head on the
 * parsed head, with the library options of leased's main listener. The
 * input, as a string, also goes straight to leased_http_rules_target, for
 * targets the library would not deliver.
 *
 * Checks, recomputed here a second way: an accepted target starts with "/",
 * is visible ASCII, and its path unescaped by the library has as many "/" as
 * the raw path, as many "\" (a raw one reaches the routes as sent; an escaped
 * one is refused) and no control character; a refused one names "request"
 * or "path". An accepted head is HTTP/1.0 or HTTP/1.1 with a token
 * method, at most one Host (exactly one in HTTP/1.1), Content-Length and
 * Authorization, Transfer-Encoding only as the one value "chunked" of an
 * HTTP/1.1 request without Content-Length, every field name a token and
 * every value free of control characters; a refusal names a known field.
 * Once the client has gone, the library holds no connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "fuzz_common.h"
#include "server/http_rules.h"

enum { MAX_INPUT = 32 * 1024, MAX_RUNS = 64 };

typedef struct fuzz_request {
    const char *target_field; /* verdict on the raw target */
    bool started;
} fuzz_request_t;

static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static size_t count_byte(const char *s, char c)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

/* The verdict on a raw target, checked against what it promises. */
static void check_target(const char *uri, const char *field)
{
    if (field) {
        FUZZ_CHECK(strcmp(field, "request") == 0 || strcmp(field, "path") == 0);
        return;
    }
    FUZZ_CHECK(uri[0] == '/');
    for (const unsigned char *p = (const unsigned char *)uri; *p; p++)
        FUZZ_CHECK(*p > 0x20 && *p < 0x7f);
    size_t path_len = strcspn(uri, "?");
    char *path = fuzz_cstr((const uint8_t *)uri, path_len);
    size_t raw_slashes = count_byte(path, '/'), raw_backslashes = count_byte(path, '\\');
    size_t n = MHD_http_unescape(path);
    FUZZ_CHECK(strlen(path) == n); /* no escaped NUL */
    FUZZ_CHECK(count_byte(path, '/') == raw_slashes);
    FUZZ_CHECK(count_byte(path, '\\') == raw_backslashes);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        FUZZ_CHECK(c >= 0x20 && c != 0x7f);
    }
    free(path);
}

typedef struct head_count {
    int host, content_length, transfer_encoding, authorization;
    bool te_chunked, fields_ok;
} head_count_t;

static enum MHD_Result count_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    head_count_t *c = cls;
    if (key_size == 0)
        c->fields_ok = false;
    for (size_t i = 0; i < key_size; i++)
        c->fields_ok &= is_tchar((unsigned char)key[i]);
    for (size_t i = 0; value && i < value_size; i++) {
        unsigned char v = (unsigned char)value[i];
        c->fields_ok &= (v >= 0x20 || v == '\t') && v != 0x7f;
    }
    if (strcasecmp(key, "host") == 0)
        c->host++;
    else if (strcasecmp(key, "content-length") == 0)
        c->content_length++;
    else if (strcasecmp(key, "authorization") == 0)
        c->authorization++;
    else if (strcasecmp(key, "transfer-encoding") == 0) {
        c->transfer_encoding++;
        c->te_chunked = value && strcasecmp(value, "chunked") == 0;
    }
    return MHD_YES;
}

static void check_head(struct MHD_Connection *conn, const char *method, const char *version,
                       const char *field)
{
    static const char *const known[] = {"request",
                                        "method",
                                        "headers",
                                        "headers.host",
                                        "headers.transfer-encoding",
                                        "headers.content-length",
                                        "headers.authorization"};
    if (field) {
        bool named = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            named |= strcmp(field, known[i]) == 0;
        FUZZ_CHECK(named);
        return;
    }
    bool v11 = strcmp(version, "HTTP/1.1") == 0;
    FUZZ_CHECK(v11 || strcmp(version, "HTTP/1.0") == 0);
    FUZZ_CHECK(method[0]);
    for (const char *m = method; *m; m++)
        FUZZ_CHECK(is_tchar((unsigned char)*m));
    head_count_t c = {.fields_ok = true};
    int n = MHD_get_connection_values_n(conn, MHD_HEADER_KIND, count_field, &c);
    FUZZ_CHECK(n >= 0 && n <= LEASED_HTTP_HEADER_LINES_MAX);
    FUZZ_CHECK(c.fields_ok);
    FUZZ_CHECK(c.host <= 1 && (!v11 || c.host == 1));
    FUZZ_CHECK(c.content_length <= 1 && c.authorization <= 1);
    FUZZ_CHECK(c.transfer_encoding == 0 ||
               (c.transfer_encoding == 1 && c.te_chunked && v11 && c.content_length == 0));
}

static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    fuzz_request_t *rq = calloc(1, sizeof *rq);
    if (!rq)
        abort();
    rq->target_field = leased_http_rules_target(uri);
    check_target(uri, rq->target_field);
    return rq;
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, bool close)
{
    static char body[] = "{}";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof body - 1, body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    if (close)
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    (void)upload_data;
    fuzz_request_t *rq = *con_cls;
    FUZZ_CHECK(rq); /* the URI log callback ran first */
    if (!rq->started) {
        rq->started = true;
        const char *field = rq->target_field;
        if (!field) {
            field = leased_http_rules_head(conn, method, version, url);
            check_head(conn, method, version, field);
        }
        if (field)
            return answer(conn, MHD_HTTP_BAD_REQUEST, true);
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    return answer(conn, MHD_HTTP_OK, false);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    free(*con_cls);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    (void)fmt;
    (void)ap;
}

/* A daemon with leased's main-listener parsing options, run by the caller. */
static struct MHD_Daemon *daemon_once(void)
{
    static struct MHD_Daemon *d;
    if (d)
        return d;
    signal(SIGPIPE, SIG_IGN);
    d = MHD_start_daemon(
        MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, NULL,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, NULL, MHD_OPTION_STRICT_FOR_CLIENT, 0,
        MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
    if (!d)
        abort();
    return d;
}

/* Sends the input as one client's bytes, then end of stream, and runs the
 * daemon until it has closed the connection. */
static void through_library(const uint8_t *data, size_t size)
{
    struct MHD_Daemon *d = daemon_once();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        abort();
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (MHD_add_connection(d, sv[0], (struct sockaddr *)&peer, sizeof peer) != MHD_YES)
        abort();
    int client = sv[1];
    size_t sent = 0;
    while (sent < size) {
        ssize_t w = write(client, data + sent, size - sent);
        if (w <= 0)
            break;
        sent += (size_t)w;
    }
    (void)shutdown(client, SHUT_WR);
    (void)fcntl(client, F_SETFL, O_NONBLOCK);
    char sink[4096];
    bool closed = false;
    for (int i = 0; i < MAX_RUNS && !closed; i++) {
        (void)MHD_run(d);
        ssize_t r;
        while ((r = read(client, sink, sizeof sink)) > 0)
            ;
        closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    close(client); /* a connection the library keeps open goes on its next write or read */
    for (int i = 0; i < 4; i++)
        (void)MHD_run(d);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    FUZZ_CHECK(info && info->num_connections == 0); /* nothing held after the client went */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    char *uri = fuzz_cstr(data, size);
    check_target(uri, leased_http_rules_target(uri));
    free(uri);
    through_library(data, size);
    return 0;
}
