/*
 * client_http.c - the libcurl transport of the client: a pool of easy
 * handles, one bounded exchange, and the judgement of whether a failed
 * exchange can have reached the service (the basis of outcome-unknown
 * resolution in client.c).
 */
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "client_internal.h"

#define POOL_IDLE_MAX 8

struct client_http_pool {
    char *ca_file; /* NULL: libcurl's default trust store */
    pthread_mutex_t lock;
    size_t n_idle;
    CURL *idle[POOL_IDLE_MAX];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static bool global_ok;

static void global_init(void)
{
    global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

client_http_pool_t *client_http_pool_new(void)
{
    pthread_once(&global_once, global_init);
    if (!global_ok)
        return NULL;
    client_http_pool_t *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

void client_http_pool_free(client_http_pool_t *pool)
{
    if (!pool)
        return;
    for (size_t i = 0; i < pool->n_idle; i++)
        curl_easy_cleanup(pool->idle[i]);
    free(pool->ca_file);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

bool client_http_pool_set_ca_file(client_http_pool_t *pool, const char *path)
{
    char *copy = path ? strdup(path) : NULL;
    if (path && !copy)
        return false;
    free(pool->ca_file);
    pool->ca_file = copy;
    return true;
}

static CURL *pool_take(client_http_pool_t *pool)
{
    CURL *h = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->n_idle > 0)
        h = pool->idle[--pool->n_idle];
    pthread_mutex_unlock(&pool->lock);
    return h ? h : curl_easy_init();
}

static void pool_give_back(client_http_pool_t *pool, CURL *h)
{
    /* reset keeps live connections and the DNS cache, drops every option */
    curl_easy_reset(h);
    pthread_mutex_lock(&pool->lock);
    if (pool->n_idle < POOL_IDLE_MAX) {
        pool->idle[pool->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (h)
        curl_easy_cleanup(h);
}

void client_http_answer_clear(client_http_answer_t *ans)
{
    if (!ans)
        return;
    free(ans->body);
    memset(ans, 0, sizeof *ans);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userp)
{
    client_http_answer_t *ans = userp;
    size_t n = size * nmemb;
    if (ans->len + n > LEASE_CLIENT_MAX_ANSWER)
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    char *grown = realloc(ans->body, ans->len + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + ans->len, data, n);
    ans->len += n;
    grown[ans->len] = '\0';
    ans->body = grown;
    return n;
}

/* Copies a header's value (after "Name:"), trimmed, into out. */
static void header_value(const char *line, size_t len, size_t name_len, char *out, size_t outsz)
{
    const char *v = line + name_len;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t n = (size_t)(end - v);
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *userp)
{
    client_http_answer_t *ans = userp;
    size_t len = size * nmemb;
    static const char corr[] = "X-Correlation-Id:";
    static const char retry[] = "Retry-After:";
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* a new response (e.g. after 100 Continue): forget the previous one's */
        ans->correlation_id[0] = '\0';
        ans->retry_after_ms = 0;
    } else if (len > sizeof corr - 1 && strncasecmp(line, corr, sizeof corr - 1) == 0) {
        header_value(line, len, sizeof corr - 1, ans->correlation_id, sizeof ans->correlation_id);
    } else if (len > sizeof retry - 1 && strncasecmp(line, retry, sizeof retry - 1) == 0) {
        char v[32];
        header_value(line, len, sizeof retry - 1, v, sizeof v);
        char *end;
        long secs = strtol(v, &end, 10);
        if (end != v && *end == '\0' && secs >= 0 && secs < 86400)
            ans->retry_after_ms = (int64_t)secs * 1000;
    }
    return len;
}

/* Sockets are close-on-exec, so a program that spawns children (leasectl
 * run) does not leak its connections to them. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)clientp;
    (void)purpose;
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* Whether a failed transfer can have delivered the request. Errors before
 * or during connection setup cannot; so cannot a timeout before a single
 * byte of the request went out. Anything else is treated as maybe sent:
 * being wrong that way costs a repeat of the same request id, never a
 * duplicate effect. */
static client_transport_t judge_failure(CURL *h, CURLcode rc)
{
    switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_FAILED_INIT:
    case CURLE_URL_MALFORMAT:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
        return CLIENT_NOT_SENT;
    case CURLE_OPERATION_TIMEDOUT: {
        long sent = 0;
        if (curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent == 0)
            return CLIENT_NOT_SENT;
        return CLIENT_MAYBE_SENT;
    }
    default:
        return CLIENT_MAYBE_SENT;
    }
}

/*
 * Runs the transfer through a multi handle so that abort_fd can end it at
 * once (a long-polling watch whose worker stops). Returns the transfer's
 * result; *aborted when abort_fd ended it.
 */
static CURLcode perform_abortable(CURL *h, int abort_fd, bool *aborted)
{
    *aborted = false;
    CURLM *m = curl_multi_init();
    if (!m)
        return CURLE_OUT_OF_MEMORY;
    if (curl_multi_add_handle(m, h) != CURLM_OK) {
        curl_multi_cleanup(m);
        return CURLE_OUT_OF_MEMORY;
    }
    CURLcode rc = CURLE_OK;
    int running = 1;
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK) {
            rc = CURLE_RECV_ERROR;
            break;
        }
        if (!running)
            break;
        struct curl_waitfd extra = {.fd = abort_fd, .events = CURL_WAIT_POLLIN};
        if (curl_multi_poll(m, &extra, 1, 1000, NULL) != CURLM_OK) {
            rc = CURLE_RECV_ERROR;
            break;
        }
        if (extra.revents & CURL_WAIT_POLLIN) {
            *aborted = true;
            rc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
    }
    if (!*aborted && rc == CURLE_OK) {
        int queued;
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(m, &queued)) != NULL)
            if (msg->msg == CURLMSG_DONE)
                rc = msg->data.result;
    }
    curl_multi_remove_handle(m, h);
    curl_multi_cleanup(m);
    return rc;
}

/* What the transport said about a failed exchange, for people: libcurl's
 * message (it names the host and port) and the system error behind it
 * ("Connection refused") when libcurl's words do not already say it. */
static void describe_failure(CURL *h, CURLcode rc, const char *curl_error, char *out, size_t outsz)
{
    const char *what = curl_error[0] ? curl_error : curl_easy_strerror(rc);
    long os_errno = 0;
    const char *os = NULL;
    char os_buf[128];
    if (curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno > 0)
        os = strerror_r((int)os_errno, os_buf, sizeof os_buf); /* GNU: thread-safe */
    if (os && !strstr(what, os))
        snprintf(out, outsz, "%s (%s)", what, os);
    else
        snprintf(out, outsz, "%s", what);
}

void client_http_perform(client_http_pool_t *pool, const char *method, const char *url,
                         const char *authorization, const char *body,
                         const lease_deadline_t *deadline, int abort_fd, client_http_answer_t *out)
{
    memset(out, 0, sizeof *out);
    out->transport = CLIENT_NOT_SENT;
    struct curl_slist *headers = NULL;
    CURL *h = pool_take(pool);
    if (!h)
        return;
    int64_t left = lease_deadline_remaining_ms(deadline);
    if (left < 1)
        left = 1;

    /* curl_slist_append copies; each copy is checked so a failed append
     * does not silently drop the credential. */
    static const char *const fixed[] = {"Accept: application/json",
                                        "Content-Type: application/json",
                                        "Expect:"}; /* no 100-continue round trip */
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        struct curl_slist *next = curl_slist_append(headers, fixed[i]);
        if (!next)
            goto cleanup;
        headers = next;
    }
    if (authorization) {
        struct curl_slist *next = curl_slist_append(headers, authorization);
        if (!next)
            goto cleanup;
        headers = next;
    }

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM games */
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (pool->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, pool->ca_file);
    curl_easy_setopt(h, CURLOPT_USERAGENT,
                     "leased-client/"
                     "0.1");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)left);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)left);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }

    char curl_error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_error);

    bool aborted = false;
    CURLcode rc = abort_fd >= 0 ? perform_abortable(h, abort_fd, &aborted) : curl_easy_perform(h);
    if (rc == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        out->transport = CLIENT_ANSWERED;
        out->status = (int)status;
    } else {
        out->transport = judge_failure(h, rc);
        out->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
        out->aborted = aborted;
        describe_failure(h, rc, curl_error, out->error, sizeof out->error);
        free(out->body);
        out->body = NULL;
        out->len = 0;
    }

cleanup:
    pool_give_back(pool, h); /* resets the handle: it no longer points at headers */
    for (struct curl_slist *s = headers; s; s = s->next)
        OPENSSL_cleanse(s->data, strlen(s->data));
    curl_slist_free_all(headers);
}
