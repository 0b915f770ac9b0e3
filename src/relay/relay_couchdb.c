/*
 * relay_couchdb.c - GET the document, compare its lease_fence, PUT with
 * _rev. A 409 (someone wrote in between) starts over from the GET, a few
 * times; a 403 is validate_doc_update refusing the write.
 */
#include "relay_couchdb.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>

#include "lease/json_fields.h"

#define COUCH_CONFLICT_TRIES 5
/* Tokens and outbox ids in a fence are JSON numbers: only integers a double
 * holds exactly (what CouchDB's JavaScript sees) are accepted, here and in
 * contrib/couchdb/validate_doc_update.js. */
#define COUCH_SAFE_MAX INT64_C(9007199254740991)
#define COUCH_MAX_BODY (16 * 1024 * 1024)

struct relay_couch {
    char *base; /* without trailing slash */
    int64_t timeout_ms;
    CURL *curl;
};

typedef struct buf {
    char *data;
    size_t len;
    bool too_big;
} buf_t;

const char *relay_couch_outcome_name(relay_couch_outcome_t o)
{
    switch (o) {
    case RELAY_COUCH_APPLIED:
        return "applied";
    case RELAY_COUCH_ALREADY:
        return "already";
    case RELAY_COUCH_REFUSED:
        return "refused";
    case RELAY_COUCH_RETRY:
        return "retry";
    case RELAY_COUCH_INVALID:
        return "invalid";
    }
    return "unknown";
}

relay_couch_t *relay_couch_new(const char *base_url, int64_t timeout_ms)
{
    relay_couch_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->base = strdup(base_url);
    c->curl = curl_easy_init();
    if (!c->base || !c->curl) {
        relay_couch_free(c);
        return NULL;
    }
    size_t n = strlen(c->base);
    while (n > 0 && c->base[n - 1] == '/')
        c->base[--n] = '\0';
    c->timeout_ms = timeout_ms;
    return c;
}

void relay_couch_free(relay_couch_t *c)
{
    if (!c)
        return;
    if (c->base) {
        OPENSSL_cleanse(c->base, strlen(c->base));
        free(c->base);
    }
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c);
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    buf_t *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > COUCH_MAX_BODY) {
        b->too_big = true;
        return 0;
    }
    char *grown = realloc(b->data, b->len + n + 1);
    if (!grown)
        return 0;
    b->data = grown;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* One request; returns the HTTP status or 0 on a transport failure (detail
 * set). *reply receives the parsed JSON body (or NULL). */
static long request(relay_couch_t *c, const char *method, const char *db, const char *doc_id,
                    const char *body, json_t **reply, char *detail, size_t detailsz)
{
    *reply = NULL;
    char *esc_db = curl_easy_escape(c->curl, db, 0);
    char *esc_id = curl_easy_escape(c->curl, doc_id, 0);
    size_t urlsz =
        strlen(c->base) + (esc_db ? strlen(esc_db) : 0) + (esc_id ? strlen(esc_id) : 0) + 4;
    char *url = malloc(urlsz);
    long status = 0;
    buf_t b = {0};
    struct curl_slist *headers = NULL;
    if (!esc_db || !esc_id || !url) {
        snprintf(detail, detailsz, "out of memory");
        goto cleanup;
    }
    snprintf(url, urlsz, "%s/%s/%s", c->base, esc_db, esc_id);
    curl_easy_reset(c->curl);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    headers = curl_slist_append(headers, "Accept: application/json");
    if (body) {
        headers = curl_slist_append(headers, "Content-Type: application/json");
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
    CURLcode rc = curl_easy_perform(c->curl);
    if (rc != CURLE_OK) {
        snprintf(detail, detailsz, "couchdb %s %s: %s", method, db,
                 b.too_big ? "answer too large" : curl_easy_strerror(rc));
        goto cleanup;
    }
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (b.data) {
        json_error_t jerr;
        *reply = json_loads(b.data, 0, &jerr);
    }
cleanup:
    curl_slist_free_all(headers);
    curl_free(esc_db);
    curl_free(esc_id);
    free(url);
    free(b.data);
    return status;
}

/* "error: reason" of a CouchDB error body. */
static void couch_reason(const json_t *reply, long status, const char *what, char *detail,
                         size_t detailsz)
{
    const char *e = json_string_value(json_object_get(reply, "error"));
    const char *r = json_string_value(json_object_get(reply, "reason"));
    snprintf(detail, detailsz, "couchdb %s answered %ld%s%s%s%.200s", what, status, e ? " " : "",
             e ? e : "", r ? ": " : "", r ? r : "");
}

/* value as a fence integer 1..2^53-1, or 0 when it is anything else. */
static int64_t safe_integer(const json_t *value)
{
    if (!json_is_integer(value))
        return 0;
    json_int_t n = json_integer_value(value);
    return n >= 1 && n <= COUCH_SAFE_MAX ? (int64_t)n : 0;
}

/* The stored document's fence against this row: ALREADY only when it holds
 * this very row's write (its outbox id and token: what the relay can verify;
 * a marker naming a later row is not believed, since any member of the
 * database can write one), REFUSED when a higher token or another identity
 * wrote it, APPLIED (meaning: go ahead) otherwise. */
static relay_couch_outcome_t compare_fence(const json_t *doc, const relay_row_t *row,
                                           json_t *identity, char *detail, size_t detailsz)
{
    const json_t *fence = json_object_get(doc, "lease_fence");
    if (!json_is_object(fence))
        return RELAY_COUCH_APPLIED; /* written before fencing: any fenced write may replace it */
    if (!json_equal(json_object_get(fence, "lock_identity"), identity)) {
        snprintf(detail, detailsz, "the document belongs to another lock identity of the tenant");
        return RELAY_COUCH_REFUSED;
    }
    int64_t token = safe_integer(json_object_get(fence, "fencing_token"));
    int64_t outbox = safe_integer(json_object_get(fence, "outbox_id"));
    if (outbox == row->outbox_id && token == row->fencing_token) {
        snprintf(detail, detailsz, "already written by this outbox row");
        return RELAY_COUCH_ALREADY;
    }
    if (token > row->fencing_token) {
        snprintf(detail, detailsz, "stale: the document holds fencing token %" PRId64 " > %" PRId64,
                 token, row->fencing_token);
        return RELAY_COUCH_REFUSED;
    }
    return RELAY_COUCH_APPLIED;
}

/* The document to PUT: the payload without _id, plus lease_fence and the
 * revision it replaces. NULL and detail when the payload is unacceptable. */
static json_t *build_doc(const json_t *payload, const relay_row_t *row, json_t *identity,
                         const char *rev, char *detail, size_t detailsz)
{
    if (json_object_get(payload, "_rev") || json_object_get(payload, "lease_fence")) {
        snprintf(detail, detailsz, "the payload names _rev or lease_fence (set by the relay)");
        return NULL;
    }
    if (json_object_get(payload, "_deleted")) {
        snprintf(detail, detailsz,
                 "the payload deletes the document: fenced documents are "
                 "marked deleted in their body instead");
        return NULL;
    }
    json_t *doc = json_deep_copy(payload);
    json_object_del(doc, "_id");
    json_t *fence = json_pack("{s:I, s:s, s:O, s:I, s:s, s:s}", "fencing_token",
                              (json_int_t)row->fencing_token, "lease_id", row->lease_id,
                              "lock_identity", identity, "outbox_id", (json_int_t)row->outbox_id,
                              "execution_id", row->execution_id, "topic", row->topic);
    if (fence && row->trace_id)
        json_object_set_new(fence, "trace_id", json_string(row->trace_id));
    if (!doc || !fence) {
        json_decref(doc);
        json_decref(fence);
        snprintf(detail, detailsz, "out of memory");
        return NULL;
    }
    json_object_set_new(doc, "lease_fence", fence);
    if (rev)
        json_object_set_new(doc, "_rev", json_string(rev));
    return doc;
}

relay_couch_outcome_t relay_couch_apply(relay_couch_t *c, const char *db, const relay_row_t *row,
                                        char *detail, size_t detailsz)
{
    detail[0] = '\0';
    json_error_t jerr;
    json_t *payload = json_loads(row->payload, 0, &jerr);
    json_t *identity = lease_json_identity(&row->identity);
    relay_couch_outcome_t out = RELAY_COUCH_INVALID;
    const char *doc_id = json_string_value(json_object_get(payload, "_id"));
    if (!json_is_object(payload) || !identity) {
        snprintf(detail, detailsz, "the payload is not a JSON object the relay can read");
        goto done;
    }
    if (!doc_id || !*doc_id || doc_id[0] == '_' || strlen(doc_id) > 1024) {
        snprintf(detail, detailsz,
                 "the payload has no string \"_id\" of 1..1024 characters "
                 "(not starting with _)");
        goto done;
    }
    if (row->fencing_token < 1 || row->fencing_token > COUCH_SAFE_MAX || row->outbox_id < 1 ||
        row->outbox_id > COUCH_SAFE_MAX) {
        snprintf(detail, detailsz, "the fencing token or outbox id is above 2^53-1");
        goto done;
    }
    /* ids are scoped per tenant: "<tenant_id>:<_id>" (tenant ids hold no
     * ':'), so one tenant's document never blocks another's */
    char scoped[LEASE_NAME_MAX + 1 + 1024 + 1];
    snprintf(scoped, sizeof scoped, "%s:%s", row->identity.tenant_id, doc_id);
    doc_id = scoped;
    out = RELAY_COUCH_RETRY;
    for (int attempt = 0; attempt < COUCH_CONFLICT_TRIES; attempt++) {
        json_t *current = NULL;
        long st = request(c, "GET", db, doc_id, NULL, &current, detail, detailsz);
        const char *rev = NULL;
        if (st == 200 && json_is_object(current)) {
            out = compare_fence(current, row, identity, detail, detailsz);
            if (out != RELAY_COUCH_APPLIED) {
                json_decref(current);
                goto done;
            }
            rev = json_string_value(json_object_get(current, "_rev"));
        } else if (st != 404) {
            if (st != 0)
                couch_reason(current, st, "GET", detail, detailsz);
            json_decref(current);
            out = RELAY_COUCH_RETRY;
            goto done;
        }
        json_t *doc = build_doc(payload, row, identity, rev, detail, detailsz);
        json_decref(current);
        if (!doc) {
            out = RELAY_COUCH_INVALID;
            goto done;
        }
        char *text = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        if (!text) {
            snprintf(detail, detailsz, "out of memory");
            out = RELAY_COUCH_RETRY;
            goto done;
        }
        json_t *reply = NULL;
        st = request(c, "PUT", db, doc_id, text, &reply, detail, detailsz);
        free(text);
        if (st == 201 || st == 202) {
            json_decref(reply);
            out = RELAY_COUCH_APPLIED;
            goto done;
        }
        if (st == 409) { /* written since the GET: look again */
            json_decref(reply);
            couch_reason(NULL, st, "PUT", detail, detailsz);
            out = RELAY_COUCH_RETRY;
            continue;
        }
        if (st != 0)
            couch_reason(reply, st, "PUT", detail, detailsz);
        json_decref(reply);
        /* 403: validate_doc_update refused it; 400: not a document (for
         * good: the row is quarantined) */
        out = st == 403 ? RELAY_COUCH_REFUSED : st == 400 ? RELAY_COUCH_INVALID : RELAY_COUCH_RETRY;
        goto done;
    }
done:
    json_decref(payload);
    json_decref(identity);
    return out;
}
