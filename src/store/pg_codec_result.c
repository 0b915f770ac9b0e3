/*
 * pg_codec_result.c - decodes the SQL functions' jsonb results into store.h
 * structs, and owns the table of which codes each operation may answer.
 *
 * Fail closed: a result that does not parse, has a field of the wrong type
 * or size, names a code its operation cannot give, or claims success without
 * its lease is LEASE_BACKEND_UNAVAILABLE for a read and LEASE_OUTCOME_UNKNOWN
 * for a mutation (its function ran; whether it committed is not known).
 * Half-decoded data never escapes: the output struct is zeroed and only the
 * code is set on failure. Metadata is the exception that is tolerated: an
 * unreadable stored value reads as null (decode_metadata).
 */
#include "pg_codec.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/hex.h"
#include "lease/json_fields.h"
#include "lease/json_text.h"
#include "lease/schema.h"
#include "pg_log.h"

typedef struct op_info {
    const char *name; /* the SQL function's */
    bool resolvable;  /* a lease mutation: a lost reply is outcome-unknown */
    unsigned allowed; /* bit per lease_code_t (LEASE_CODE_BIT) */
} op_info_t;

static const op_info_t ops[STORE_PG_OP_COUNT] = {
#define OP_INFO(ID, FUNCTION, RESOLVABLE, CODES) [STORE_PG_OP_##ID] = {FUNCTION, RESOLVABLE, CODES},
    LEASE_STORE_CALLS(OP_INFO)
#undef OP_INFO
        /* internal operations: no typed answer of their own beyond success, and
         * nobody resolves them (a lost reply is backend_unavailable) */
        [STORE_PG_OP_SWEEP] = {"sweep_expired", false, 0},
    [STORE_PG_OP_RECORD_AUDIT] = {"record_audit", false, 0},
    [STORE_PG_OP_CREDENTIAL_LOOKUP] = {"credential_lookup", false, 0},
    [STORE_PG_OP_HEALTH] = {"health", false, 0},
    [STORE_PG_OP_HOUSEKEEPING] = {"housekeeping", false, 0},
};

const char *store_pg_op_name(store_pg_op_t op)
{
    return (unsigned)op < STORE_PG_OP_COUNT ? ops[op].name : "unknown";
}

bool store_pg_op_allows(store_pg_op_t op, lease_code_t code)
{
    return (unsigned)op < STORE_PG_OP_COUNT && (unsigned)code < LEASE_CODE_COUNT &&
           (ops[op].allowed & LEASE_CODE_BIT(code)) != 0;
}

/* The lease operations whose function may have committed before its answer
 * was read, and whose caller resolves that by repeating its request id. */
bool store_pg_op_resolvable(store_pg_op_t op)
{
    return (unsigned)op < STORE_PG_OP_COUNT && ops[op].resolvable;
}

/* Logs why a result was rejected. A read answers backend_unavailable; a
 * mutation's function has run and committed by the time its answer is
 * read, so an answer we cannot read is outcome_unknown (resolvable by
 * repeating the request id), never "nothing happened". */
static lease_code_t malformed(store_pg_op_t op, const char *why)
{
    store_pg_log_rec_t rec = {
        .event = "malformed_result", .op = store_pg_op_name(op), .message = why};
    store_pg_log(STORE_PG_LOG_ERROR, &rec);
    return store_pg_op_resolvable(op) ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE;
}

/* Length of the JSON number token at p (0 when p does not start one). */
static size_t number_token_len(const char *p, bool *is_integer)
{
    size_t n = 0;
    *is_integer = true;
    if (p[n] == '-')
        n++;
    if (p[n] < '0' || p[n] > '9')
        return 0;
    while ((p[n] >= '0' && p[n] <= '9') || p[n] == '.' || p[n] == 'e' || p[n] == 'E' ||
           p[n] == '+' || p[n] == '-') {
        if (p[n] == '.' || p[n] == 'e' || p[n] == 'E')
            *is_integer = false;
        n++;
    }
    return n;
}

/* Whether jansson refuses the number token as out of range: an integer
 * beyond int64, or a real beyond a double. */
static bool number_unreadable(const char *p, size_t n, bool is_integer)
{
    char buf[64];
    if (n >= sizeof buf)
        return true; /* 64+ characters: no int64, and a double only as a curiosity */
    memcpy(buf, p, n);
    buf[n] = '\0';
    errno = 0;
    if (is_integer) {
        (void)strtoll(buf, NULL, 10);
        return errno == ERANGE;
    }
    double x = strtod(buf, NULL);
    return errno == ERANGE && (x == HUGE_VAL || x == -HUGE_VAL);
}

/*
 * A copy of text in which every number jansson cannot hold (jsonb keeps
 * numeric values of any size: 10000000000000000000, 1e400) is replaced by
 * null padded with spaces. Such a value can only be metadata written before
 * the number bound existed, or by SQL; decoding the rest keeps one stored
 * value from making every read that touches it fail. Required fields that
 * turn null this way still fail their own checks. NULL when out of memory.
 */
static char *null_unreadable_numbers(const char *text)
{
    char *copy = strdup(text);
    if (!copy)
        return NULL;
    bool in_string = false;
    for (char *p = copy; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_string = false;
            continue;
        }
        if (*p == '"') {
            in_string = true;
            continue;
        }
        bool is_integer;
        size_t n = number_token_len(p, &is_integer);
        if (n == 0)
            continue;
        /* an unreadable token is at least 5 characters ("1e999"), so
         * "null" always fits in its place */
        if (n >= 4 && number_unreadable(p, n, is_integer)) {
            memcpy(p, "null", 4);
            memset(p + 4, ' ', n - 4);
        }
        p += n - 1;
    }
    return copy;
}

json_t *store_pg_parse_object(const char *text)
{
    if (!text)
        return NULL;
    json_error_t err;
    json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!v && json_error_code(&err) == json_error_numeric_overflow) {
        char *copy = null_unreadable_numbers(text);
        if (copy) {
            v = json_loads(copy, JSON_REJECT_DUPLICATES, &err);
            free(copy);
        }
    }
    if (v && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* A result's human "detail": optional, shortened to fit (it only informs);
 * cut at a character boundary so it stays UTF-8. */
static bool get_detail(json_t *o, char *buf, size_t size)
{
    json_t *v = json_object_get(o, "detail");
    buf[0] = '\0';
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v))
        return false;
    size_t len = json_string_length(v);
    if (len >= size) {
        len = size - 1;
        while (len > 0 && ((unsigned char)json_string_value(v)[len] & 0xC0) == 0x80)
            len--;
    }
    memcpy(buf, json_string_value(v), len);
    buf[len] = '\0';
    return strlen(buf) == len;
}

/*
 * A record's metadata as compact text. Metadata is the caller's own
 * non-authoritative data, so it never makes a record unreadable: a number
 * outside the request bound (|x| > 2^53-1, or one jsonb holds but a double
 * cannot) reads as null (lease_json_null_unsafe_numbers, the rule the
 * answer encoder applies to Valkey's stored text too), and metadata that is
 * not an object or does not fit reads as null as a whole (docs/api.md
 * "Numbers").
 */
static void decode_metadata(json_t *meta, char *out, size_t outsz)
{
    snprintf(out, outsz, "{}");
    if (!meta || json_is_null(meta))
        return; /* no metadata */
    snprintf(out, outsz, "null");
    if (!json_is_object(meta) || !lease_json_null_unsafe_numbers(meta))
        return;
    char *text = lease_json_dumps(meta, JSON_SORT_KEYS);
    if (text && strlen(text) < outsz)
        memcpy(out, text, strlen(text) + 1);
    free(text);
}

/* How much of a lease record an answer must carry (docs/sql-api.md "Result
 * shape"): inspect and list answer whole records; the brief answer of a
 * state-changing operation leaves out what its request named, which the
 * adapter completes from the request (store_pg.c): an acquisition names its
 * new lease id and token, a renewal or an ending names neither. A whole
 * record is always accepted. */
typedef enum record_shape {
    RECORD_WHOLE,
    RECORD_ACQUIRED, /* identity may be absent */
    RECORD_NAMED,    /* identity, lease id and token may be absent */
} record_shape_t;

static record_shape_t answer_shape(store_pg_op_t op)
{
    switch (op) {
    case STORE_PG_OP_ACQUIRE:
        return RECORD_ACQUIRED;
    case STORE_PG_OP_RENEW:
    case STORE_PG_OP_RELEASE:
    case STORE_PG_OP_FORCE_RELEASE:
    case STORE_PG_OP_REVOKE:
        return RECORD_NAMED;
    default:
        return RECORD_WHOLE;
    }
}

static bool decode_record(json_t *o, lease_record_t *r, record_shape_t shape)
{
    memset(r, 0, sizeof *r);
    if (!json_is_object(o))
        return false;
    char state[16];
    json_t *identity = json_object_get(o, "lock_identity");
    bool whole = shape == RECORD_WHOLE || identity;
    bool named = whole || shape == RECORD_ACQUIRED;
    bool partial = !whole;
    if ((whole && !lease_json_get_identity(identity, &r->identity)) ||
        !lease_json_get_str(o, "lease_id", r->lease_id, sizeof r->lease_id, named) ||
        !lease_json_get_int(o, "fencing_token", &r->fencing_token, named, 1) ||
        !lease_json_get_str(o, "state", state, sizeof state, true) ||
        !lease_state_parse(state, &r->state) ||
        !lease_json_get_time(o, "acquired_at", &r->acquired_at_ms, true) ||
        !lease_json_get_time(o, "renewed_at", &r->renewed_at_ms, true) ||
        !lease_json_get_time(o, "expires_at", &r->expires_at_ms, true) ||
        !lease_json_get_time(o, "ended_at", &r->ended_at_ms, false) ||
        !lease_json_get_int(o, "ttl_ms", &r->ttl_ms, true, 1) ||
        !lease_json_get_int(o, "maximum_lifetime_ms", &r->maximum_lifetime_ms, true, 1) ||
        !lease_json_get_str(o, "owner_principal_id", r->owner_principal_id,
                            sizeof r->owner_principal_id, false) ||
        !lease_json_get_str(o, "owner_client_id", r->owner_client_id, sizeof r->owner_client_id,
                            false) ||
        !lease_json_get_str(o, "owner_credential_id", r->owner_credential_id,
                            sizeof r->owner_credential_id, false) ||
        !lease_json_get_str(o, "service_instance_id", r->service_instance_id,
                            sizeof r->service_instance_id, false) ||
        !lease_json_get_str(o, "execution_id", r->execution_id, sizeof r->execution_id, false) ||
        !lease_json_get_str(o, "job_id", r->job_id, sizeof r->job_id, false) ||
        !lease_json_get_str(o, "trace_id", r->trace_id, sizeof r->trace_id, false) ||
        !lease_json_get_str(o, "request_id", r->request_id, sizeof r->request_id, false) ||
        !lease_json_get_str(o, "end_reason", r->end_reason, sizeof r->end_reason, false) ||
        !lease_json_get_str(o, "incident_id", r->incident_id, sizeof r->incident_id, false) ||
        !lease_json_get_str(o, "session_id", r->session_id, sizeof r->session_id, false))
        return false;
    json_t *meta = json_object_get(o, "metadata");
    if (!meta && partial)
        r->metadata_json[0] = '\0'; /* the request's (store_pg.c completes it) */
    else
        decode_metadata(meta, r->metadata_json, sizeof r->metadata_json);
    return r->expires_at_ms >= r->acquired_at_ms && r->renewed_at_ms >= r->acquired_at_ms;
}

/* Starts a decoder on o, an answer already parsed (NULL when its text was
 * not a JSON object), and takes it: zeroes the decoder's answer (outsz
 * bytes at out) and returns o when it is a result object of op, its code
 * read into *code and one op may answer; otherwise frees it and returns
 * NULL, with *why saying what is wrong. On success *why is the reason for
 * a field the caller then finds malformed. */
static json_t *open_object(store_pg_op_t op, json_t *o, void *out, size_t outsz, lease_code_t *code,
                           const char **why)
{
    memset(out, 0, outsz);
    if (!o) {
        *why = "not a JSON object";
        return NULL;
    }
    json_t *c = json_object_get(o, "code");
    if (!json_is_string(c) || !lease_code_parse(json_string_value(c), code)) {
        *why = "missing or unknown code";
    } else if (!store_pg_op_allows(op, *code)) {
        *why = "code not allowed for this operation";
    } else {
        *why = "malformed result field";
        return o;
    }
    json_decref(o);
    return NULL;
}

/* open_object on an answer's text. */
static json_t *open_result(store_pg_op_t op, const char *text, void *out, size_t outsz,
                           lease_code_t *code, const char **why)
{
    return open_object(op, store_pg_parse_object(text), out, outsz, code, why);
}

/* Ends a decoder on an answer it cannot read: frees o (may be NULL), zeroes
 * the answer and returns the code to report (see malformed). */
static lease_code_t refuse_result(json_t *o, store_pg_op_t op, const char *why, void *out,
                                  size_t outsz)
{
    json_decref(o);
    memset(out, 0, outsz);
    return malformed(op, why);
}

/* A session as the session functions answer it (lease._session_json). */
static bool decode_session(const json_t *o, lease_session_t *s)
{
    return json_is_object(o) &&
           lease_json_get_str(o, "session_id", s->session_id, sizeof s->session_id, true) &&
           lease_json_get_str(o, "tenant_id", s->tenant_id, sizeof s->tenant_id, true) &&
           lease_json_get_str(o, "owner_principal_id", s->owner_principal_id,
                              sizeof s->owner_principal_id, true) &&
           lease_json_get_str(o, "owner_credential_id", s->owner_credential_id,
                              sizeof s->owner_credential_id, true) &&
           lease_json_get_str(o, "service_instance_id", s->service_instance_id,
                              sizeof s->service_instance_id, true) &&
           lease_json_get_int(o, "ttl_ms", &s->ttl_ms, true, 1) &&
           lease_json_get_time(o, "created_at", &s->created_at_ms, true) &&
           lease_json_get_time(o, "renewed_at", &s->renewed_at_ms, true) &&
           lease_json_get_time(o, "expires_at", &s->expires_at_ms, true) &&
           lease_json_get_str(o, "state", s->state, sizeof s->state, true);
}

/* Decodes one operation's answer object; takes o (may be NULL). */
static lease_code_t decode_result_object(store_pg_op_t op, json_t *o, lease_result_t *out)
{
    const char *why;
    lease_code_t code;
    o = open_object(op, o, out, sizeof *out, &code, &why);
    if (!o)
        goto malformed;
    json_t *lease = json_object_get(o, "lease");
    if (lease && !json_is_null(lease)) {
        if (!decode_record(lease, &out->lease, answer_shape(op))) {
            why = "malformed lease record";
            goto malformed;
        }
        out->has_lease = true;
    }
    json_t *session = json_object_get(o, "session");
    if (session && !json_is_null(session)) {
        if (!decode_session(session, &out->session)) {
            why = "malformed session";
            goto malformed;
        }
        out->has_session = true;
    }
    if (!lease_json_get_int(o, "leases_ended", &out->leases_ended, false, 0) ||
        !lease_json_get_bool(o, "more", &out->more))
        goto malformed;
    char current[16];
    char reason[32];
    if (!lease_json_get_bool(o, "replayed", &out->replayed) ||
        !lease_json_get_int(o, "retry_after_ms", &out->retry_after_ms, false, 0) ||
        !lease_json_get_str(o, "field", out->field, sizeof out->field, false) ||
        !lease_json_get_str(o, "reason", reason, sizeof reason, false) ||
        !get_detail(o, out->detail, sizeof out->detail) ||
        !lease_json_get_str(o, "current_state", current, sizeof current, false))
        goto malformed;
    if (current[0] && !lease_state_parse(current, &out->current_state))
        goto malformed;
    if (lease_code_is_success(code) && !out->has_lease && !out->has_session) {
        why = "success without a lease";
        goto malformed;
    }
    if (out->replayed && !out->current_state)
        out->current_state = out->lease.state;
    /* the function's own words ("sealed") become the wire's stable reason */
    if (strcmp(reason, "sealed") == 0)
        snprintf(out->reason, sizeof out->reason, "namespace_sealed");
    else
        snprintf(out->reason, sizeof out->reason, "%s", reason);
    out->code = code;
    json_decref(o);
    return code;
malformed:
    out->code = refuse_result(o, op, why, out, sizeof *out);
    return out->code;
}

lease_code_t store_pg_decode_result(store_pg_op_t op, const char *text, lease_result_t *out)
{
    return decode_result_object(op, store_pg_parse_object(text), out);
}

/* many: STORE_PG_OP_RENEW_MANY or STORE_PG_OP_RELEASE_MANY */
static lease_code_t decode_many(store_pg_op_t many, const char *text, size_t n,
                                lease_result_t *results)
{
    bool renew = many == STORE_PG_OP_RENEW_MANY;
    json_t *o = store_pg_parse_object(text);
    json_t *arr = o ? json_object_get(o, "results") : NULL;
    if (!json_is_array(arr) || json_array_size(arr) != n) {
        json_decref(o);
        return malformed(many, "not one result per item");
    }
    for (size_t i = 0; i < n; i++) {
        /* each item read in place, as a single answer is (a non-object item
         * decodes as a malformed answer: outcome_unknown) */
        json_t *item = json_array_get(arr, i);
        decode_result_object(renew ? STORE_PG_OP_RENEW : STORE_PG_OP_RELEASE,
                             json_is_object(item) ? json_incref(item) : NULL, &results[i]);
    }
    json_decref(o);
    return renew ? LEASE_RENEWED : LEASE_RELEASED;
}

lease_code_t store_pg_decode_renew_many(const char *text, size_t n, lease_result_t *results)
{
    return decode_many(STORE_PG_OP_RENEW_MANY, text, n, results);
}

lease_code_t store_pg_decode_release_many(const char *text, size_t n, lease_result_t *results)
{
    return decode_many(STORE_PG_OP_RELEASE_MANY, text, n, results);
}

lease_code_t store_pg_decode_list(store_pg_op_t op, const char *text, lease_list_result_t *out)
{
    const char *why;
    lease_code_t code;
    json_t *o = open_result(op, text, out, sizeof *out, &code, &why);
    if (!o)
        goto malformed;
    if (!lease_json_get_str(o, "field", out->field, sizeof out->field, false) ||
        !lease_json_get_str(o, "next_page_token", out->next_page_token, sizeof out->next_page_token,
                            false))
        goto malformed;
    json_t *leases = json_object_get(o, "leases");
    if (code == LEASE_LISTED) {
        if (!json_is_array(leases)) {
            why = "listed without leases";
            goto malformed;
        }
        size_t n = json_array_size(leases);
        if (n > 0) {
            out->leases = calloc(n, sizeof *out->leases);
            if (!out->leases) {
                why = "out of memory";
                goto malformed;
            }
        }
        for (size_t i = 0; i < n; i++) {
            if (!decode_record(json_array_get(leases, i), &out->leases[i], RECORD_WHOLE)) {
                why = "malformed lease record in list";
                goto malformed;
            }
        }
        out->count = n;
    } else if (leases && !json_is_null(leases)) {
        why = "failure with leases";
        goto malformed;
    }
    out->code = code;
    json_decref(o);
    return code;
malformed:
    free(out->leases);
    out->code = refuse_result(o, op, why, out, sizeof *out);
    return out->code;
}

lease_code_t store_pg_decode_commit(const char *text, size_t n_writes, lease_commit_result_t *out)
{
    const store_pg_op_t op = STORE_PG_OP_FENCED_COMMIT;
    const char *why;
    lease_code_t code;
    json_t *o = open_result(op, text, out, sizeof *out, &code, &why);
    if (!o)
        goto malformed;
    if (!lease_json_get_bool(o, "replayed", &out->replayed) ||
        !lease_json_get_str(o, "field", out->field, sizeof out->field, false) ||
        !lease_json_get_int(o, "retry_after_ms", &out->retry_after_ms, false, 0) ||
        !lease_json_get_int(o, "current_revision", &out->current_revision, false, 0))
        goto malformed;
    if (code == LEASE_COMMIT_ACCEPTED) {
        json_t *results = json_object_get(o, "results");
        if (!json_is_array(results) || json_array_size(results) != n_writes ||
            n_writes > LEASE_COMMIT_WRITES_MAX) {
            why = "results do not match the writes";
            goto malformed;
        }
        for (size_t i = 0; i < n_writes; i++) {
            json_t *item = json_array_get(results, i);
            char kind[16];
            if (!json_is_object(item) || !lease_json_get_str(item, "kind", kind, sizeof kind, true))
                goto malformed;
            const char *key = strcmp(kind, "document") == 0      ? "revision"
                              : strcmp(kind, "publication") == 0 ? "outbox_id"
                                                                 : NULL;
            if (!key || !lease_json_get_int(item, key, &out->revisions[i], true, 1))
                goto malformed;
        }
        out->n_writes = n_writes;
    }
    out->code = code;
    json_decref(o);
    return code;
malformed:
    out->code = refuse_result(o, op, why, out, sizeof *out);
    return out->code;
}

int store_pg_decode_position(const char *text, int *epoch, int *timeline, uint64_t *wal_lsn)
{
    json_t *o = store_pg_parse_object(text);
    int64_t ep = -1, tl = 0;
    char lsn[32];
    unsigned hi, lo;
    char extra;
    int rc = o && lease_json_get_int(o, "epoch", &ep, true, 0) && ep <= INT32_MAX &&
                     lease_json_get_int(o, "timeline", &tl, true, 1) && tl <= INT32_MAX &&
                     lease_json_get_str(o, "wal_lsn", lsn, sizeof lsn, true) &&
                     sscanf(lsn, "%X/%X%c", &hi, &lo, &extra) == 2
                 ? 0
                 : -1;
    json_decref(o);
    if (rc == 0) {
        *epoch = (int)ep;
        *timeline = (int)tl;
        *wal_lsn = (uint64_t)hi << 32 | lo;
    }
    return rc;
}

lease_code_t store_pg_decode_sweep(const char *sweep_text, const char *purge_text,
                                   lease_sweep_result_t *out)
{
    memset(out, 0, sizeof *out);
    json_t *s = store_pg_parse_object(sweep_text);
    json_t *p = store_pg_parse_object(purge_text);
    bool ran_sweep = false, ran_purge = false;
    bool ok = s && p && lease_json_get_bool(s, "ran", &ran_sweep) &&
              lease_json_get_int(s, "expired", &out->expired, false, 0) &&
              lease_json_get_bool(p, "ran", &ran_purge) &&
              lease_json_get_int(p, "idempotency_purged", &out->idempotency_purged, false, 0) &&
              lease_json_get_int(p, "history_purged", &out->history_purged, false, 0) &&
              lease_json_get_int(p, "audit_purged", &out->audit_purged, false, 0) &&
              json_is_boolean(json_object_get(s, "ran"));
    json_decref(s);
    json_decref(p);
    if (!ok) {
        memset(out, 0, sizeof *out);
        return malformed(STORE_PG_OP_SWEEP, "malformed sweep result");
    }
    out->ran = ran_sweep;
    return LEASE_INSPECTED;
}

lease_code_t store_pg_decode_housekeeping(lease_housekeeping_step_t step, const char *text,
                                          lease_housekeeping_result_t *out)
{
    static const char *const purged[LEASE_TABLE_COUNT] = {"idempotency_purged", "history_purged",
                                                          "lease_index_purged", "audit_purged"};
    static const char *const lag[LEASE_TABLE_COUNT] = {"idempotency_lag_ms", "history_lag_ms",
                                                       "lease_index_lag_ms", "audit_lag_ms"};
    memset(out, 0, sizeof *out);
    json_t *o = store_pg_parse_object(text);
    bool ok =
        o && lease_json_get_bool(o, "ran", &out->ran) && lease_json_get_bool(o, "more", &out->more);
    if (ok && out->ran && step == LEASE_STEP_EXPIRE)
        ok = lease_json_get_int(o, "expired", &out->expired, true, 0) &&
             lease_json_get_int(o, "lag_ms", &out->lag_ms, true, 0);
    for (int t = 0; ok && out->ran && step == LEASE_STEP_PURGE && t < LEASE_TABLE_COUNT; t++)
        ok = lease_json_get_int(o, purged[t], &out->purged[t], true, 0) &&
             lease_json_get_int(o, lag[t], &out->purge_lag_ms[t], true, 0);
    /* sessions (schema 28): ended ones past the idempotency retention;
     * absent (0) from a purge that keeps none */
    if (ok && out->ran && step == LEASE_STEP_PURGE)
        ok = lease_json_get_int(o, "sessions_purged", &out->sessions_purged, false, 0);
    json_decref(o);
    if (!ok) {
        memset(out, 0, sizeof *out);
        return malformed(STORE_PG_OP_HOUSEKEEPING, "malformed housekeeping result");
    }
    return LEASE_INSPECTED;
}

static unsigned capability_bit(const char *name)
{
    static const struct {
        const char *name;
        unsigned bit;
    } caps[] = {
        {"targets:lease", LEASE_CAP_LEASE},
        {"targets:read", LEASE_CAP_READ},
        {"targets:force-release", LEASE_CAP_FORCE_RELEASE},
        {"targets:revoke", LEASE_CAP_REVOKE},
        {"audit:read", LEASE_CAP_AUDIT_READ},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        if (strcmp(caps[i].name, name) == 0)
            return caps[i].bit;
    return 0; /* unknown capabilities grant nothing */
}

static bool decode_credential_row(json_t *o, lease_credential_t *c)
{
    char digest_hex[65];
    json_t *actors = json_object_get(o, "actor_names");
    json_t *caps = json_object_get(o, "capabilities");
    json_t *admin = json_object_get(o, "admin");
    json_t *revoked = json_object_get(o, "revoked");
    json_t *expires_in = json_object_get(o, "expires_in_ms");
    bool ok =
        lease_json_get_str(o, "credential_id", c->credential_id, sizeof c->credential_id, true) &&
        lease_json_get_str(o, "principal_id", c->principal_id, sizeof c->principal_id, true) &&
        lease_json_get_str(o, "client_id", c->client_id, sizeof c->client_id, true) &&
        lease_json_get_str(o, "tenant_id", c->scope.tenant_id, sizeof c->scope.tenant_id, true) &&
        lease_json_get_str(o, "program_id", c->scope.program_id, sizeof c->scope.program_id,
                           true) &&
        lease_json_get_str(o, "secret_digest", digest_hex, sizeof digest_hex, true) &&
        strlen(digest_hex) == 64 && lease_json_get_time(o, "created_at", &c->created_at_ms, true) &&
        json_is_boolean(admin) && json_is_array(actors) && json_is_array(caps) &&
        json_array_size(actors) <= LEASE_SCOPE_ACTORS_MAX &&
        /* decided from the backend's own judgement (0015), never from the
         * rendered expires_at/revoked_at: both must be present */
        json_is_boolean(revoked) &&
        (json_is_null(expires_in) ||
         (json_is_integer(expires_in) && json_integer_value(expires_in) >= 0));
    if (!ok)
        goto cleanup;
    c->admin = json_is_true(admin);
    c->revoked = json_is_true(revoked);
    c->has_expiry = json_is_integer(expires_in);
    c->expires_in_ms = c->has_expiry ? (int64_t)json_integer_value(expires_in) : 0;
    ok = lease_hex_decode(digest_hex, sizeof c->secret_digest, c->secret_digest);
    size_t i;
    json_t *v;
    json_array_foreach(actors, i, v)
    {
        if (!ok)
            break;
        const char *s = json_string_value(v);
        if (!s || !*s || strlen(s) > LEASE_NAME_MAX) {
            ok = false;
        } else if (strcmp(s, "*") == 0) {
            c->scope.all_actors = true;
        } else {
            memcpy(c->scope.actor_names[c->scope.n_actors++], s, strlen(s) + 1);
        }
    }
    json_array_foreach(caps, i, v)
    {
        if (!ok)
            break;
        const char *s = json_string_value(v);
        if (!s)
            ok = false;
        else
            c->capabilities |= capability_bit(s);
    }
cleanup:
    OPENSSL_cleanse(digest_hex, sizeof digest_hex);
    return ok;
}

lease_code_t store_pg_decode_credential(const char *text, lease_credential_t *out, bool *found)
{
    memset(out, 0, sizeof *out);
    *found = false;
    if (!text)
        return LEASE_NOT_FOUND;
    json_t *o = NULL;
    json_error_t err;
    o = json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    lease_code_t code = LEASE_NOT_FOUND;
    if (o && json_is_null(o))
        goto cleanup;
    if (!json_is_object(o) || !decode_credential_row(o, out)) {
        OPENSSL_cleanse(out, sizeof *out);
        code = malformed(STORE_PG_OP_CREDENTIAL_LOOKUP, "malformed credential row");
        goto cleanup;
    }
    *found = true;
    code = LEASE_INSPECTED;
cleanup:
    json_decref(o);
    return code;
}

lease_code_t store_pg_decode_health(const char *text, lease_health_t *out)
{
    bool reachable = out->reachable;
    memset(out, 0, sizeof *out);
    out->reachable = reachable;
    out->expected_schema_version = LEASE_SCHEMA_VERSION;
    json_t *o = store_pg_parse_object(text);
    int64_t version = 0;
    bool ok = o && lease_json_get_int(o, "schema_version", &version, true, 0) &&
              version <= 1000000 && json_is_boolean(json_object_get(o, "sealed")) &&
              lease_json_get_bool(o, "sealed", &out->sealed) &&
              lease_json_get_int(o, "active_leases", &out->active_leases, false, 0);
    json_decref(o);
    if (!ok) {
        out->sealed = false;
        out->active_leases = 0;
        return malformed(STORE_PG_OP_HEALTH, "malformed health result");
    }
    out->schema_version = (int)version;
    out->schema_current = out->schema_version == out->expected_schema_version;
    return LEASE_INSPECTED;
}

lease_code_t store_pg_decode_audit_count(const char *text, size_t expected)
{
    char *end = NULL;
    long long n = text ? strtoll(text, &end, 10) : -1;
    if (!text || !*text || *end || n < 0 || (size_t)n != expected)
        return malformed(STORE_PG_OP_RECORD_AUDIT, "record_audit count differs from the batch");
    return LEASE_INSPECTED;
}
