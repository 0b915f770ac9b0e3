/*
 * http_common.h - helpers shared by the http_*.c tests (header only; each
 * test file is its own program): request bodies, envelope checks and the
 * per-file fixture of a database, a leased and a few credentials.
 */
#ifndef LEASE_TEST_HTTP_COMMON_H
#define LEASE_TEST_HTTP_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "http_client.h"
#include "leased_proc.h"
#include "testpg.h"

#define TENANT "tenant-main"
#define PROGRAM "program-a"
#define NAMESPACE "starintel-target"
#define ACTOR "usernamegen"

/* A lock identity object (new reference). */
static inline json_t *identity_json(const char *target)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", TENANT, "program_id", PROGRAM,
                     "target_namespace", NAMESPACE, "target_id", target, "actor_name", ACTOR,
                     "workflow_name", "default");
}

/* Serialises and frees obj. */
static inline char *dump(json_t *obj)
{
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return s;
}

/* Parses text (a body built by the helpers here) and frees it. */
static inline json_t *parse_owned(char *text)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    free(text);
    return o;
}

static inline char *acquire_body(const char *request_id, const char *target)
{
    return dump(json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", request_id, "lock_identity",
                          identity_json(target), "service_instance_id", "inst_1", "execution_id",
                          "exec_1", "job_id", "job_1"));
}

/* renew/release body from an acquire reply (lease object). */
static inline char *owner_body(const char *request_id, const char *target, json_t *lease)
{
    return dump(json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", request_id, "lock_identity",
                          identity_json(target), "lease_id", json_object_get(lease, "lease_id"),
                          "fencing_token", json_object_get(lease, "fencing_token"),
                          "service_instance_id", "inst_1"));
}

static inline char *admin_body(const char *request_id, const char *target, json_t *lease,
                               const char *reason)
{
    json_t *o = json_pack("{s:s, s:o, s:O, s:O}", "request_id", request_id, "lock_identity",
                          identity_json(target), "lease_id", json_object_get(lease, "lease_id"),
                          "fencing_token", json_object_get(lease, "fencing_token"));
    if (reason)
        json_object_set_new(o, "reason", json_string(reason));
    return dump(o);
}

/* Text that must never reach a client. */
static const char *const forbidden_always[] = {
    "starintel:target-lease",
    "select ",
    "insert ",
    "update ",
    "delete ",
    "sqlstate",
    "postgres",
    "pg_",
    "error:",
    "violat",
    "relation \"",
    "syntax",
    "stack",
    "lsk_",
    "lease.",
    "ls00",
    "plpgsql",
    "context:",
    NULL,
};

static inline bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && (p[i] | 0x20) == (needle[i] | 0x20))
            i++;
        if (i == n)
            return true;
    }
    return false;
}

/*
 * Checks one reply: the expected status and code, an envelope of the
 * documented shape, the correlation id in body and header, Retry-After on
 * 429/503, and none of the forbidden texts nor any of `others` (other
 * owners' identities; NULL-terminated, may be NULL).
 */
static inline void check_reply(const http_resp_t *r, long status, const char *code,
                               const char *const *others)
{
    assert_non_null(r);
    if (r->status != status || !http_resp_str(r, "code") ||
        strcmp(http_resp_str(r, "code"), code) != 0)
        fprintf(stderr, "unexpected reply %ld: %s\n", r->status, r->body);
    assert_int_equal(r->status, status);
    assert_non_null(r->json);
    assert_string_equal(http_resp_str(r, "code"), code);
    const char *corr = http_resp_str(r, "correlation_id");
    assert_non_null(corr);
    assert_int_equal(strncmp(corr, "corr_", 5), 0);
    assert_int_equal(strlen(corr), 31);
    const char *hdr = http_resp_header(r, "X-Correlation-Id");
    assert_non_null(hdr);
    assert_string_equal(hdr, corr);
    const char *st = http_resp_str(r, "status");
    assert_non_null(st);
    if (status == 200) {
        assert_string_equal(st, "success");
    } else {
        assert_string_equal(st, "error");
        assert_non_null(http_resp_str(r, "msg"));
        assert_true(json_is_boolean(json_object_get(r->json, "retryable")));
    }
    if (status == 429 || status == 503) {
        assert_non_null(http_resp_header(r, "Retry-After"));
        assert_true(atoi(http_resp_header(r, "Retry-After")) >= 1);
        assert_true(http_resp_int(r, "retry_after_ms") > 0);
    }
    for (const char *const *f = forbidden_always; *f; f++) {
        if (contains_ci(r->body, *f))
            fprintf(stderr, "forbidden text '%s' in: %s\n", *f, r->body);
        assert_false(contains_ci(r->body, *f));
    }
    for (const char *const *o = others; o && *o; o++) {
        if (strstr(r->body, *o))
            fprintf(stderr, "another owner's identity '%s' in: %s\n", *o, r->body);
        assert_null(strstr(r->body, *o));
    }
}

/* One call that must reach the server. */
static inline http_resp_t *call(const char *base, const char *method, const char *path,
                                const char *token, const char *body)
{
    http_resp_t *r = http_call(base, method, path, token, body);
    assert_non_null(r);
    return r;
}

/* A call whose body is built by the caller and freed here. */
static inline http_resp_t *call_owned(const char *base, const char *method, const char *path,
                                      const char *token, char *body)
{
    http_resp_t *r = call(base, method, path, token, body);
    free(body);
    return r;
}

/* The "lease" object of a reply (borrowed from r). */
static inline json_t *lease_of(const http_resp_t *r)
{
    json_t *l = json_object_get(r->json, "lease");
    assert_true(json_is_object(l));
    return l;
}

#endif
