/*
 * http_client.c - libcurl requests for tests, with parsed JSON replies.
 */
#include "http_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct http_client {
    long connects;
    CURL *curl;
    char base[256];
    long timeout_ms;
};

typedef struct buf {
    char *data;
    size_t len;
} buf_t;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_data(char *ptr, size_t size, size_t n, void *userdata)
{
    buf_t *b = userdata;
    size_t add = size * n;
    char *nd = realloc(b->data, b->len + add + 1);
    if (!nd)
        return 0;
    memcpy(nd + b->len, ptr, add);
    b->data = nd;
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

http_client_t *http_client_new(const char *base, long timeout_ms)
{
    pthread_once(&curl_once, curl_init_once);
    http_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->curl = curl_easy_init();
    if (!c->curl) {
        free(c);
        return NULL;
    }
    snprintf(c->base, sizeof c->base, "%s", base);
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
    return c;
}

void http_client_free(http_client_t *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->curl);
    free(c);
}

http_resp_t *http_client_call_raw(http_client_t *c, const char *method, const char *path,
                                  const char *token, const char *body, size_t body_len,
                                  const char *const *headers, char *err)
{
    CURL *h = c->curl;
    char url[1024];
    snprintf(url, sizeof url, "%s%s", c->base, path);
    buf_t out = {NULL, 0}, hdr = {NULL, 0};
    struct curl_slist *list = NULL;
    char auth[1024];
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        list = curl_slist_append(list, auth);
    }
    if (body)
        list = curl_slist_append(list, "Content-Type: application/json");
    /* no "Expect: 100-continue" round trip for larger bodies */
    list = curl_slist_append(list, "Expect:");
    for (const char *const *hp = headers; hp && *hp; hp++)
        list = curl_slist_append(list, *hp);

    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &hdr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(list);
    long opened = 0;
    if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK)
        c->connects += opened;
    if (rc != CURLE_OK) {
        if (err)
            snprintf(err, 256, "%s", curl_easy_strerror(rc));
        free(out.data);
        free(hdr.data);
        return NULL;
    }
    http_resp_t *r = calloc(1, sizeof *r);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    r->body = out.data ? out.data : strdup("");
    r->body_len = out.len;
    r->headers = hdr.data ? hdr.data : strdup("");
    json_error_t jerr;
    r->json = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    return r;
}

http_resp_t *http_client_call(http_client_t *c, const char *method, const char *path,
                              const char *token, const char *body, const char *const *headers,
                              char *err)
{
    return http_client_call_raw(c, method, path, token, body, body ? strlen(body) : 0, headers,
                                err);
}

http_resp_t *http_call(const char *base, const char *method, const char *path, const char *token,
                       const char *body)
{
    http_client_t *c = http_client_new(base, 0);
    char err[256];
    http_resp_t *r = http_client_call(c, method, path, token, body, NULL, err);
    if (!r)
        fprintf(stderr, "http_call %s %s: %s\n", method, path, err);
    http_client_free(c);
    return r;
}

long http_client_connects(const http_client_t *c)
{
    return c->connects;
}

const char *http_resp_header(const http_resp_t *r, const char *name)
{
    static __thread char value[512];
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vlen = len - (size_t)(v - line);
            while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            if (vlen >= sizeof value)
                vlen = sizeof value - 1;
            memcpy(value, v, vlen);
            value[vlen] = '\0';
            return value;
        }
        if (!end)
            break;
        line = end + 2;
    }
    return NULL;
}

const char *http_resp_str(const http_resp_t *r, const char *key)
{
    return r && r->json ? json_string_value(json_object_get(r->json, key)) : NULL;
}

long long http_resp_int(const http_resp_t *r, const char *key)
{
    json_t *v = r && r->json ? json_object_get(r->json, key) : NULL;
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

json_t *http_resp_get(const http_resp_t *r, const char *path)
{
    json_t *cur = r ? r->json : NULL;
    char part[128];
    while (cur && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof part)
            return NULL;
        memcpy(part, path, n);
        part[n] = '\0';
        cur = json_object_get(cur, part);
        path += n;
        if (*path == '.')
            path++;
    }
    return cur;
}

void http_resp_free(http_resp_t *r)
{
    if (!r)
        return;
    json_decref(r->json);
    free(r->body);
    free(r->headers);
    free(r);
}
