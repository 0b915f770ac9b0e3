/*
 * race_auth_flood.c - a flood of random, well-formed bearer tokens from one
 * address (issue 10, defect 5).
 *
 * Before the fix every such request cost a credential lookup and an audit
 * row (about 0.3 database transactions per rejected request) and slowed
 * everyone. Now: a source whose authentications keep failing gets no more
 * lookups than LEASE_AUTH_FAILURE_LIMIT allows (further unknown ids answer
 * 429 without one), unknown ids never push known credentials out of the
 * cache, and its refusals are audited as one event per source, kind and
 * window with a count. Measured here with pg_stat_database.xact_commit over
 * leased's whole life: at most 0.1 transactions per rejected request. A
 * client of another address is served throughout, and the flood changes
 * nothing but the audit log.
 *
 * On Valkey (LEASE_TEST_STORE=valkey) the same properties, observed as
 * that backend keeps them: the store round trips are the server's own count
 * of function calls (INFO commandstats: FCALL and FCALL_RO, each one atomic
 * call as a transaction is on PostgreSQL), with the same bound; the audit
 * events are the Stream's entries (an aggregated event's count is its
 * event_count field, absent when 1: docs/backends.md "Audit events on
 * Valkey"); "nothing else changed" is a digest of every key and its value
 * but the audit Stream.
 */
#include <time.h>

#include "../http/http_common.h"
#include "lease/token.h"
#include "raw_http.h"

#define THREADS 4
#define PER_THREAD 1500

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "race_auth_flood");
    worker = http_fx_worker(&fx, "prn_flood_victim");
    return 0;
}

/* One reply of redis-cli on the test's server (heap). */
static char *valkey_cli(const char *const *args)
{
    char *out = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(out);
    return out;
}

/* The calls= figure of a cmdstat_ line of INFO commandstats (0: the
 * command was never called). */
static long long cmdstat_calls(const char *info, const char *command)
{
    char tag[64];
    snprintf(tag, sizeof tag, "cmdstat_%s:calls=", command);
    const char *p = strstr(info, tag);
    return p ? strtoll(p + strlen(tag), NULL, 10) : 0;
}

/* The store's round trips so far: transactions committed in the database
 * (Postgres), function calls the server ran (Valkey; leased reaches the
 * library only through FCALL and FCALL_RO). */
static long long store_round_trips(void)
{
    if (!fx.valkey)
        return testpg_query_int(fx.db, "SELECT xact_commit FROM pg_stat_database "
                                       "WHERE datname = current_database()");
    const char *args[] = {"INFO", "commandstats", NULL};
    char *info = valkey_cli(args);
    assert_non_null(strstr(info, "cmdstat_fcall")); /* the stats are there */
    long long calls = cmdstat_calls(info, "fcall") + cmdstat_calls(info, "fcall_ro");
    free(info);
    return calls;
}

/* What a refused request may not change: the tables of testpg_state_digest
 * (Postgres), every key but the audit Stream (Valkey). */
static char *state_digest(void)
{
    return http_fx_state_digest(&fx);
}

/* The sum of the event_count fields (absent: 1) of the Stream's entries
 * whose source_address is ARGV[1]. */
#define VALKEY_EVENT_COUNT_LUA                                                                     \
    TEST_STORE_AUDIT_FIELDS_LUA                                                                    \
    "local n = 0 "                                                                                 \
    "for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do "                              \
    "  local f, src, c = audit_fields(e), nil, 1 "                                                 \
    "  for i = 1, #f, 2 do "                                                                       \
    "    if f[i] == 'source_address' then src = f[i + 1] end "                                     \
    "    if f[i] == 'event_count' then c = tonumber(f[i + 1]) end "                                \
    "  end "                                                                                       \
    "  if src == ARGV[1] then n = n + c end "                                                      \
    "end "                                                                                         \
    "return n"

/* The refusals the audit events of addr stand for: the sum of their
 * event_count (each event counts 1 unless aggregated). */
static long long audited_refusals_from(const char *addr)
{
    if (!fx.valkey) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT coalesce(sum(event_count), 0) FROM lease.audit_log WHERE "
                 "source_address = '%s'",
                 addr);
        return testpg_query_int(fx.db, sql);
    }
    char audit[128];
    http_fx_valkey_key(audit, sizeof audit, "audit");
    const char *args[] = {"EVAL", VALKEY_EVENT_COUNT_LUA, "1", audit, addr, NULL};
    return test_store_valkey_cli_int(&fx.vk, args);
}

/* addr's audit events of an authentication denied with code (Valkey). */
static long long denied_authentications(const char *addr, const char *code)
{
    const char *match[] = {
        "source_address", addr, "event_type", "target_lease_authenticate", "decision", "deny",
        "result_code",    code, NULL};
    return http_fx_audit_count(&fx, match);
}

/* Audit events of addr that are anything but an authentication denied
 * with invalid_credential or lease_rate_limited. */
static long long other_events_from(const char *addr)
{
    if (!fx.valkey) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.audit_log WHERE source_address = '%s' AND "
                 "(event_type <> 'target_lease_authenticate' OR decision <> 'deny' OR "
                 "result_code NOT IN ('invalid_credential', 'lease_rate_limited'))",
                 addr);
        return testpg_query_int(fx.db, sql);
    }
    /* all of addr's events less those of the two kinds allowed */
    const char *all[] = {"source_address", addr, NULL};
    return http_fx_audit_count(&fx, all) - denied_authentications(addr, "invalid_credential") -
           denied_authentications(addr, "lease_rate_limited");
}

typedef struct flooder {
    int port;
    int rejected, other;
} flooder_t;

static void *flood(void *arg)
{
    flooder_t *f = arg;
    raw_conn_t *c = raw_connect(f->port, "127.0.0.1");
    for (int i = 0; i < PER_THREAD && c; i++) {
        char id[LEASE_CREDENTIAL_ID_LEN + 1], token[LEASE_TOKEN_MAX + 1];
        unsigned char secret[LEASE_SECRET_BYTES];
        if (!lease_token_generate(id, secret, token))
            break;
        char req[512];
        snprintf(req, sizeof req,
                 "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\nAuthorization: Bearer %s\r\n"
                 "Content-Length: 2\r\n\r\n{}",
                 token);
        if (!raw_send(c, req))
            break;
        raw_resp_t *r = raw_read(c, 20000);
        if (!r)
            break;
        const char *code = raw_str(r, "code");
        if ((r->status == 401 && code && strcmp(code, "invalid_credential") == 0) ||
            (r->status == 429 && code && strcmp(code, "lease_rate_limited") == 0))
            f->rejected++;
        else
            f->other++;
        raw_resp_free(r);
    }
    raw_close(c);
    return NULL;
}

static void test_bad_token_flood(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_AUTH_AUDIT_WINDOW_MS=60000", NULL};
    long long before_x = store_round_trips();
    http_fx_serve(&fx, env);
    /* (leased records the cluster's identity when it first starts) */
    char *before = state_digest();
    int port = leased_proc_port(fx.srv);

    flooder_t f[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        f[i] = (flooder_t){.port = port};
        pthread_create(&th[i], NULL, flood, &f[i]);
    }
    /* another address is served throughout */
    raw_conn_t *c = raw_connect(port, "127.0.0.2");
    assert_non_null(c);
    int served = 0;
    for (int i = 0; i < 20; i++) {
        char *body = inspect_body("t-nothing");
        char *req = NULL;
        assert_true(asprintf(&req,
                             "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                             "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n%s",
                             worker, strlen(body), body) > 0);
        assert_true(raw_send(c, req));
        raw_resp_t *r = raw_read(c, 20000);
        assert_non_null(r);
        if (r->status != 404)
            fprintf(stderr, "legit inspect: %d %s\n", r->status, r->body);
        assert_int_equal(r->status, 404); /* authenticated, looked, nothing there */
        served++;
        raw_resp_free(r);
        free(req);
        free(body);
    }
    raw_close(c);
    int rejected = 0, other = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        rejected += f[i].rejected;
        other += f[i].other;
    }
    assert_int_equal(other, 0);
    assert_int_equal(rejected, THREADS * PER_THREAD);

    /* stop leased: its sessions flush their statistics as they exit, and
     * the audit queue writes its aggregated events */
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
    /* (Valkey counts each call as it runs: nothing to wait for) */
    for (int i = 0; !fx.valkey && i < 500; i++) {
        if (testpg_query_int(fx.db, "SELECT count(*) FROM pg_stat_activity WHERE "
                                    "datname = current_database() AND application_name = "
                                    "'leased'") == 0)
            break;
        usleep(20000);
    }
    long long spent = store_round_trips() - before_x;
    fprintf(stderr,
            "auth flood: %d rejected requests, %d served from another address; %lld %s "
            "in leased's whole life (%.4f per rejected request)\n",
            rejected, served, spent,
            fx.valkey ? "function calls (FCALL, FCALL_RO)" : "database transactions",
            (double)spent / rejected);
    assert_true((double)spent / rejected <= 0.1);

    /* the audit log holds a few aggregated events that account for every
     * refusal of the flooding address, and still says who and what */
    const char *from_flooder[] = {"source_address", "127.0.0.1", NULL};
    long long rows =
        fx.valkey ? http_fx_audit_count(&fx, from_flooder) : http_audited_from(fx.db, "127.0.0.1");
    long long counted = audited_refusals_from("127.0.0.1");
    fprintf(stderr, "auth flood: %lld audit events stand for %lld refusals\n", rows, counted);
    assert_true(rows >= 1 && rows <= 6);
    assert_int_equal(counted, rejected);
    assert_int_equal(other_events_from("127.0.0.1"), 0);
    /* nothing else changed */
    char *after = state_digest();
    assert_string_equal(before, after);
    free(before);
    free(after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_token_flood),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
