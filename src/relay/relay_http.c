/*
 * relay_http.c - the metrics and health endpoint. Answers come only from
 * relay_metrics_t; nothing here blocks on the database or the broker.
 */
#include "relay_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

struct relay_http {
    struct MHD_Daemon *daemon;
    relay_metrics_t *metrics;
    int port;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, mode);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result r = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    relay_http_t *h = cls;
    if (*con_cls == NULL) { /* first call: headers only */
        *con_cls = h;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* no route takes a body */
        return MHD_YES;
    }
    static char not_found[] = "{\"status\":\"error\",\"code\":\"not_found\"}\n";
    static char not_allowed[] = "{\"status\":\"error\",\"code\":\"method_not_allowed\"}\n";
    static char ok[] = "{\"status\":\"ok\"}\n";
    static char ready[] = "{\"status\":\"ready\"}\n";
    static char no_db[] = "{\"status\":\"not_ready\",\"reason\":\"database_unreachable\"}\n";
    static char no_broker[] = "{\"status\":\"not_ready\",\"reason\":\"broker_unreachable\"}\n";
    static char draining[] = "{\"status\":\"not_ready\",\"reason\":\"draining\"}\n";
    static char oom[] = "out of memory\n";
    const char *json = "application/json";
    bool known =
        strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0;
    if (!known)
        return reply(conn, MHD_HTTP_NOT_FOUND, json, not_found, MHD_RESPMEM_PERSISTENT);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, json, not_allowed, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/healthz") == 0)
        return reply(conn, MHD_HTTP_OK, json, ok, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/readyz") == 0) {
        char *body = RELAY_METRIC_GET(h->metrics, draining)       ? draining
                     : !RELAY_METRIC_GET(h->metrics, database_up) ? no_db
                     : !RELAY_METRIC_GET(h->metrics, broker_up)   ? no_broker
                                                                  : ready;
        return reply(conn, body == ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, json, body,
                     MHD_RESPMEM_PERSISTENT);
    }
    char *text = relay_metrics_render(h->metrics);
    if (!text)
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", oom,
                     MHD_RESPMEM_PERSISTENT);
    return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4", text, MHD_RESPMEM_MUST_FREE);
}

relay_http_t *relay_http_start(const char *host, int port, relay_metrics_t *metrics, char *err,
                               size_t errsz)
{
    relay_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    h->metrics = metrics;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (strchr(host, ':')) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        inet_pton(AF_INET6, host, &a6->sin6_addr);
        flags |= MHD_USE_IPv6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        inet_pton(AF_INET, host, &a4->sin_addr);
    }
    h->daemon =
        MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errsz, "cannot listen on %s:%d", host, port);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    return h;
}

int relay_http_port(const relay_http_t *h)
{
    return h->port;
}

void relay_http_stop(relay_http_t *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
