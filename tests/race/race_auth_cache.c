/*
 * race_auth_cache.c - bearer authentication against the real store: a fresh
 * copy of the migrated database, the Postgres adapter as leased opens it
 * (service login role), and credentials made by the real `leasectl
 * credential create` child process.
 *
 * Proves: only the digest is stored and the CLI never prints it; bad CLI
 * input is refused with its exit status and stores nothing; the service role
 * may not administer credentials while a plain lease_admin login (READ
 * COMMITTED by default) may, because leasectl opens SERIALIZABLE itself; a valid
 * token is accepted with the scope and capabilities it was created with; a
 * tampered secret, a tampered id, a wrong pepper and an unknown id are all
 * rejected as invalid_credential; a revocation is seen within the cache TTL
 * (and at once after lease_auth_forget); an expired credential is rejected
 * even while cached; many threads authenticating at once all get the right
 * answer while the database sees about one lookup per id per TTL.
 *
 * On Valkey (LEASE_TEST_STORE=valkey, test_store.h): the same cases against
 * a redis-server of the file's own, the Valkey adapter (as leased opens it
 * for LEASE_STORE_URL) and the real `leasectl credential` on its URL. The
 * stored digest is the credential hash's secret_digest, the secret is
 * looked for in every key and value of the server (the audit Stream too),
 * and "stores nothing" counts the credential keys and the credential set
 * (docs/backends.md "Keys"). Left out there (PostgreSQL's login roles):
 * the service role refused administration, in the bad-input case, and the
 * plain lease_admin login role's case, in the pg_only table.
 */
#include <fcntl.h>
#include <jansson.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "lease/store_pg.h"
#include "lease/store_valkey.h"
#include "lease/token.h"
#include "server/auth.h"
#include "test_store.h"
#include "test_wait.h"
#include "testpg.h"
#include "../http/http_common.h" /* http_fx_run_group, http_fx_valkey_key */

#define PEPPER "race-auth-pepper"

static char *db_url;  /* superuser: leasectl credential runs as the admin; or the redis:// URL */
static char *svc_url; /* the service login role, as leased connects (NULL on Valkey) */
static lease_store_t *real_store;
static bool on_valkey;         /* LEASE_TEST_STORE=valkey */
static test_store_valkey_t vk; /* its redis-server, namespace bound by leasectl migrate */

/* What redis-cli printed for args on the test's server, its last newline
 * taken off (heap). */
static char *valkey_cli(const char *const *args)
{
    char *out = test_store_valkey_cli(&vk, args);
    assert_non_null(out);
    size_t n = strlen(out);
    if (n && out[n - 1] == '\n')
        out[n - 1] = '\0';
    return out;
}

/* redis-cli's integer answer to args. */
static long long valkey_cli_int(const char *const *args)
{
    return test_store_valkey_cli_int(&vk, args);
}

/* A pass-through store that counts credential lookups reaching Postgres. */
static atomic_int lookups;
static lease_code_t counting_lookup(lease_store_t *s, const char *id, const lease_deadline_t *d,
                                    lease_credential_t *out, bool *found)
{
    (void)s;
    atomic_fetch_add(&lookups, 1);
    return lease_store_credential_lookup(real_store, id, d, out, found);
}
static const lease_store_ops_t counting_ops = {.credential_lookup = counting_lookup};
static lease_store_t counting_store = {.ops = &counting_ops, .impl = NULL};

/* Runs leasectl with n arguments against url, with the pepper (may be NULL)
 * in its environment; returns its exit status and its stdout (heap) in *out. */
static int leasectl_run(const char *url, char **out, const char *pepper, const char *const *args,
                        size_t n_args)
{
    char *argv[40];
    size_t n = 0;
    assert_true(n_args + 4 <= sizeof argv / sizeof argv[0]);
    argv[n++] = strdup(LEASE_TEST_LEASECTL);
    for (size_t i = 0; i < n_args; i++)
        argv[n++] = strdup(args[i]);
    argv[n++] = strdup("--database-url");
    argv[n++] = strdup(url);
    argv[n] = NULL;

    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        if (pepper)
            setenv("LEASE_TOKEN_PEPPER", pepper, 1);
        else
            unsetenv("LEASE_TOKEN_PEPPER");
        unsetenv("LEASE_DATABASE_URL");
        execv(argv[0], argv);
        _exit(127);
    }
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    close(fds[1]);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while ((got = read(fds[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)got;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The same with NULL-terminated variadic arguments. */
static int leasectl_at(const char *url, char **out, const char *pepper, va_list ap)
{
    const char *args[36];
    size_t n = 0;
    for (const char *a = va_arg(ap, const char *); a; a = va_arg(ap, const char *)) {
        assert_true(n < sizeof args / sizeof args[0]);
        args[n++] = a;
    }
    return leasectl_run(url, out, pepper, args, n);
}

/* leasectl as the database owner (an administrator). */
static int leasectl(char **out, const char *pepper, ...)
{
    va_list ap;
    va_start(ap, pepper);
    int rc = leasectl_at(db_url, out, pepper, ap);
    va_end(ap);
    return rc;
}

/* leasectl as the service login role (not an administrator). */
static int leasectl_as_service(char **out, const char *pepper, ...)
{
    va_list ap;
    va_start(ap, pepper);
    int rc = leasectl_at(svc_url, out, pepper, ap);
    va_end(ap);
    return rc;
}

typedef struct made {
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    char token[LEASE_TOKEN_MAX + 1];
} made_t;

/* Creates a credential with the CLI; extra arguments are appended. */
static made_t make_credential(const char *pepper, const char *principal, ...)
{
    const char *args[24];
    int n = 0;
    args[n++] = "credential";
    args[n++] = "create";
    args[n++] = "--principal";
    args[n++] = principal;
    args[n++] = "--client";
    args[n++] = "client_race";
    va_list ap;
    va_start(ap, principal);
    for (const char *a = va_arg(ap, const char *); a; a = va_arg(ap, const char *)) {
        assert_true(n < 24);
        args[n++] = a;
    }
    va_end(ap);
    char *out = NULL;
    int rc = leasectl_run(db_url, &out, pepper, args, (size_t)n);
    if (rc != 0)
        fprintf(stderr, "leasectl credential create exited %d: %s\n", rc, out);
    assert_int_equal(rc, 0);
    json_error_t jerr;
    json_t *o = json_loads(out, 0, &jerr);
    assert_non_null(o);
    /* what the CLI prints: the token once, never a digest */
    assert_null(json_object_get(o, "secret_digest"));
    assert_null(strstr(out, "secret_digest"));
    made_t m;
    snprintf(m.id, sizeof m.id, "%s", json_string_value(json_object_get(o, "credential_id")));
    snprintf(m.token, sizeof m.token, "%s", json_string_value(json_object_get(o, "token")));
    assert_int_equal(strlen(m.id), LEASE_CREDENTIAL_ID_LEN);
    assert_int_equal(strlen(m.token), LEASE_TOKEN_MAX);
    assert_string_equal(json_string_value(json_object_get(o, "principal_id")), principal);
    json_decref(o);
    free(out);
    return m;
}

static lease_auth_t *new_auth(int64_t ttl_ms, const char *pepper)
{
    lease_auth_config_t cfg = {.cache_ttl_ms = ttl_ms, .pepper = pepper};
    lease_auth_t *a = lease_auth_new(&counting_store, &cfg);
    assert_non_null(a);
    return a;
}

static bool authenticate(lease_auth_t *a, const char *token, lease_caller_t *caller,
                         lease_code_t *code)
{
    char header[LEASE_TOKEN_MAX + 16];
    snprintf(header, sizeof header, "Bearer %s", token);
    lease_deadline_t d = lease_deadline_in(5000);
    return lease_auth_authenticate(a, header, &d, caller, code);
}

static void expect_invalid(lease_auth_t *a, const char *token)
{
    lease_caller_t caller;
    lease_code_t code = LEASE_ACQUIRED;
    assert_false(authenticate(a, token, &caller, &code));
    assert_int_equal(code, LEASE_INVALID_CREDENTIAL);
}

/* The Valkey adapter on the test's server, as leased opens it for
 * LEASE_STORE_URL. */
static int open_valkey_store(void)
{
    lease_valkey_url_t u;
    char err[256] = "";
    if (!lease_valkey_url_parse(vk.url, &u, err, sizeof err)) {
        fprintf(stderr, "store url: %s\n", err);
        return -1;
    }
    lease_valkey_config_t cfg = {
        .host = u.host, .port = u.port, .ns = u.ns, .connect_timeout_ms = 5000, .pool_size = 4};
    lease_code_t rc = lease_valkey_store_open(&cfg, &real_store, err, sizeof err);
    lease_valkey_url_wipe(&u);
    if (rc != LEASE_INSPECTED || !real_store) {
        fprintf(stderr, "lease_valkey_store_open: %s (%s)\n", lease_code_name(rc), err);
        return -1;
    }
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    on_valkey = test_store_is_valkey();
    if (on_valkey) {
        test_store_valkey_start(&vk);
        db_url = strdup(vk.url); /* leasectl's --database-url */
        printf("backend: valkey (%s)\n", vk.url);
        return open_valkey_store();
    }
    db_url = testpg_create_db("race_auth");
    svc_url = testpg_service_url(db_url);
    lease_store_pg_config_t cfg = {.conninfo = svc_url,
                                   .pool_size = 4,
                                   .connect_timeout_ms = 5000,
                                   .application_name = "race_auth_cache"};
    char err[256] = "";
    if (lease_store_pg_open(&cfg, &real_store, err, sizeof err) != 0) {
        fprintf(stderr, "lease_store_pg_open: %s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    lease_store_close(real_store);
    if (on_valkey)
        test_store_valkey_stop(&vk);
    else
        testpg_drop_db(db_url);
    free(svc_url);
    free(db_url);
    return 0;
}

static void hex_of(const unsigned char d[32], char out[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The stored secret_digest of a credential, as hex (heap; NULL: none):
 * lease.credentials on Postgres, the credential's hash on Valkey. */
static char *stored_digest(const char *credential_id)
{
    if (!on_valkey) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT encode(secret_digest, 'hex') FROM lease.credentials WHERE "
                 "credential_id = '%s'",
                 credential_id);
        return testpg_query_value(db_url, sql);
    }
    char key[128], suffix[64];
    snprintf(suffix, sizeof suffix, "cred:%s", credential_id);
    http_fx_valkey_key(key, sizeof key, suffix);
    const char *args[] = {"HGET", key, "secret_digest", NULL};
    return valkey_cli(args);
}

/* A statement that fails when any table of the lease schema holds text. */
static const char *no_table_holds(const char *text)
{
    static char find[512];
    snprintf(find, sizeof find,
             "DO $$ DECLARE t regclass; hit boolean; BEGIN "
             "FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid=c.relnamespace "
             "WHERE n.nspname='lease' AND c.relkind='r' LOOP "
             "EXECUTE format('SELECT bool_or(strpos(x::text, %%L) > 0) FROM %%s x', '%s', t) "
             "INTO hit; "
             "IF hit THEN RAISE EXCEPTION 'secret found in %%', t; END IF; END LOOP; END $$",
             text);
    return find;
}

/* The keys of the server whose name or any part of whose value (each
 * string, hash field and value, member, score, Stream entry field and
 * value) contains ARGV[1], one a line; "" when none. */
#define VALKEY_HOLDING_LUA                                                                         \
    "local found = {} "                                                                            \
    "local function has(v) return string.find(v, ARGV[1], 1, true) ~= nil end "                    \
    "for _, k in ipairs(redis.call('KEYS', '*')) do "                                              \
    "  local t, parts = redis.call('TYPE', k)['ok'], {k} "                                         \
    "  if t == 'string' then parts[2] = redis.call('GET', k) "                                     \
    "  elseif t == 'hash' then for _, v in ipairs(redis.call('HGETALL', k)) do "                   \
    "    parts[#parts + 1] = v end "                                                               \
    "  elseif t == 'set' then for _, v in ipairs(redis.call('SMEMBERS', k)) do "                   \
    "    parts[#parts + 1] = v end "                                                               \
    "  elseif t == 'zset' then "                                                                   \
    "    for _, v in ipairs(redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')) do "                     \
    "      parts[#parts + 1] = v end "                                                             \
    "  elseif t == 'list' then for _, v in ipairs(redis.call('LRANGE', k, 0, -1)) do "             \
    "    parts[#parts + 1] = v end "                                                               \
    "  elseif t == 'stream' then "                                                                 \
    "    for _, e in ipairs(redis.call('XRANGE', k, '-', '+')) do "                                \
    "      parts[#parts + 1] = e[1] "                                                              \
    "      for _, v in ipairs(e[2]) do parts[#parts + 1] = v end end "                             \
    "  else parts[2] = redis.call('DUMP', k) end "                                                 \
    "  for _, v in ipairs(parts) do "                                                              \
    "    if has(v) then found[#found + 1] = k break end end "                                      \
    "end "                                                                                         \
    "table.sort(found) "                                                                           \
    "return table.concat(found, '\\n')"

/* Which keys of the test's redis-server hold text (see above; heap). */
static char *valkey_holding(const char *text)
{
    const char *args[] = {"EVAL", VALKEY_HOLDING_LUA, "0", text, NULL};
    return valkey_cli(args);
}

/* Only HMAC(pepper, secret) is stored: compare with an independent HMAC of
 * the printed token's secret, and look for the secret text anywhere. */
static void test_only_digest_is_stored(void **state)
{
    (void)state;
    made_t m = make_credential(PEPPER, "prn_stored", "--tenant", "tenant-main", "--program",
                               "program-a", "--capability", "targets:lease", NULL);
    const char *secret_text = m.token + strlen(m.token) - LEASE_SECRET_B64_LEN;
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES], mac[32];
    assert_true(lease_token_parse(m.token, id, secret));
    unsigned int maclen = 0;
    assert_non_null(
        HMAC(EVP_sha256(), PEPPER, (int)strlen(PEPPER), secret, sizeof secret, mac, &maclen));
    char expect[65];
    hex_of(mac, expect);

    char *stored = stored_digest(m.id);
    assert_non_null(stored);
    assert_string_equal(stored, expect);
    free(stored);

    if (on_valkey) {
        /* the secret appears in no key nor value of the server */
        char *where = valkey_holding(secret_text);
        if (where[0])
            fprintf(stderr, "secret found in %s\n", where);
        assert_string_equal(where, "");
        free(where);
        /* (and the search finds a text that is there: the digest) */
        where = valkey_holding(expect);
        assert_non_null(strstr(where, ":cred:"));
        free(where);
    } else {
        /* the secret appears in no table of the schema */
        assert_true(testpg_exec(db_url, no_table_holds(secret_text)));
    }

    /* list shows the credential and no digest */

    char *out = NULL;
    assert_int_equal(leasectl(&out, NULL, "credential", "list", NULL), 0);
    assert_non_null(strstr(out, m.id));
    assert_null(strstr(out, "secret_digest"));
    assert_null(strstr(out, expect));
    free(out);
}

static void test_valid_token_accepted_with_its_scope(void **state)
{
    (void)state;
    made_t w =
        make_credential(PEPPER, "prn_worker", "--tenant", "Tenant-Main", "--program", "program-a",
                        "--actor", "usernamegen", "--actor", "collector", "--capability",
                        "targets:lease", "--capability", "targets:read", NULL);
    lease_auth_t *a = new_auth(2000, PEPPER);
    lease_caller_t c;
    lease_code_t code = LEASE_ACQUIRED;
    assert_true(authenticate(a, w.token, &c, &code));
    assert_string_equal(c.principal.principal_id, "prn_worker");
    assert_string_equal(c.principal.client_id, "client_race");
    assert_string_equal(c.principal.credential_id, w.id);
    assert_string_equal(c.principal.principal_class, "worker");
    assert_false(c.admin);
    assert_string_equal(c.scope.tenant_id, "tenant-main"); /* normalised by the CLI */
    assert_string_equal(c.scope.program_id, "program-a");
    assert_false(c.scope.all_actors);
    assert_int_equal(c.scope.n_actors, 2);
    assert_true(lease_auth_has(&c, LEASE_CAP_LEASE | LEASE_CAP_READ));
    assert_false(lease_auth_has(&c, LEASE_CAP_AUDIT_READ));
    assert_false(lease_auth_has(&c, LEASE_CAP_FORCE_RELEASE));

    lease_identity_t id;
    memset(&id, 0, sizeof id);
    strcpy(id.tenant_id, "tenant-main");
    strcpy(id.program_id, "program-a");
    strcpy(id.actor_name, "collector");
    assert_true(lease_auth_in_scope(&c, &id));
    strcpy(id.actor_name, "enricher");
    assert_false(lease_auth_in_scope(&c, &id));

    made_t adm = make_credential(PEPPER, "prn_admin", "--tenant", "tenant-main", "--program", "*",
                                 "--admin", "--capability",
                                 "targets:lease,targets:read,targets:force-release,"
                                 "targets:revoke,audit:read",
                                 NULL);
    assert_true(authenticate(a, adm.token, &c, &code));
    assert_true(c.admin);
    assert_string_equal(c.principal.principal_class, "admin");
    assert_string_equal(c.scope.program_id, "*");
    assert_true(c.scope.all_actors);
    assert_true(
        lease_auth_has(&c, LEASE_CAP_FORCE_RELEASE | LEASE_CAP_REVOKE | LEASE_CAP_AUDIT_READ));
    strcpy(id.program_id, "program-other");
    assert_true(lease_auth_in_scope(&c, &id));
    lease_auth_free(a);
}

static void test_tampered_and_unknown_rejected(void **state)
{
    (void)state;
    made_t m = make_credential(PEPPER, "prn_tamper", "--tenant", "tenant-main", "--program",
                               "program-a", "--capability", "targets:lease", NULL);
    lease_auth_t *a = new_auth(2000, PEPPER);
    lease_caller_t c;
    lease_code_t code;
    assert_true(authenticate(a, m.token, &c, &code)); /* now cached */

    char t[LEASE_TOKEN_MAX + 1];
    /* every secret position, flipped to another valid character */
    for (size_t pos = LEASE_TOKEN_MAX - LEASE_SECRET_B64_LEN; pos < LEASE_TOKEN_MAX - 1; pos++) {
        memcpy(t, m.token, sizeof t);
        t[pos] = t[pos] == 'A' ? 'B' : 'A';
        expect_invalid(a, t);
    }
    /* a different credential id with the right secret */
    memcpy(t, m.token, sizeof t);
    t[4 + 4] = t[4 + 4] == 'a' ? 'b' : 'a';
    expect_invalid(a, t);
    /* an id nobody created */
    expect_invalid(
        a, "lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8");

    /* the right token under another pepper, or none */
    lease_auth_t *other = new_auth(2000, "another-pepper");
    expect_invalid(other, m.token);
    lease_auth_free(other);
    lease_auth_t *plain = new_auth(2000, NULL);
    expect_invalid(plain, m.token);
    lease_auth_free(plain);

    /* and the genuine token still works afterwards */
    assert_true(authenticate(a, m.token, &c, &code));
    lease_auth_free(a);
}

static void test_revocation_visible_within_ttl(void **state)
{
    (void)state;
    const int64_t ttl_ms = 400;
    made_t m = make_credential(PEPPER, "prn_revoke", "--tenant", "tenant-main", "--program",
                               "program-a", "--capability", "targets:lease", NULL);
    lease_auth_t *a = new_auth(ttl_ms, PEPPER);
    lease_caller_t c;
    lease_code_t code;
    assert_true(authenticate(a, m.token, &c, &code));
    /* the cached answer was fetched before this instant */
    int64_t cached_by = lease_mono_now_ns();

    char *out = NULL;
    assert_int_equal(leasectl(&out, NULL, "credential", "revoke", m.id, NULL), 0);
    assert_non_null(strstr(out, "\"revoked\":true"));
    free(out);

    /* Until the TTL has run since the fetch the cached answer may still
     * be used (the documented window); the first authentication after
     * that asks the database and is refused, and it stays refused. The
     * wait is for the cache's own clock to pass its TTL, not a guess. */
    assert_true(test_wait_until(30000, lease_mono_now_ns() - cached_by > ttl_ms * 1000000));
    for (int i = 0; i < 6; i++)
        expect_invalid(a, m.token);

    /* revoking again changes nothing and says so */
    assert_int_equal(leasectl(&out, NULL, "credential", "revoke", m.id, NULL), 1);
    assert_non_null(strstr(out, "\"revoked\":false"));
    free(out);
    lease_auth_free(a);

    /* with a long TTL, lease_auth_forget makes it immediate */
    made_t m2 = make_credential(PEPPER, "prn_revoke2", "--tenant", "tenant-main", "--program",
                                "program-a", "--capability", "targets:lease", NULL);
    a = new_auth(60000, PEPPER);
    assert_true(authenticate(a, m2.token, &c, &code));
    assert_int_equal(leasectl(&out, NULL, "credential", "revoke", m2.id, NULL), 0);
    free(out);
    assert_true(authenticate(a, m2.token, &c, &code)); /* still cached: the documented window */
    lease_auth_forget(a, m2.id);
    expect_invalid(a, m2.token);
    lease_auth_free(a);
}

static void test_expired_rejected_even_when_cached(void **state)
{
    (void)state;
    made_t m =
        make_credential(PEPPER, "prn_expiring", "--tenant", "tenant-main", "--program", "program-a",
                        "--capability", "targets:lease", "--expires-in", "2s", NULL);
    lease_auth_t *a = new_auth(60000, PEPPER); /* the cache alone would keep it a minute */
    lease_caller_t c;
    lease_code_t code;
    assert_true(authenticate(a, m.token, &c, &code));
    int before = atomic_load(&lookups);
    lease_sleep_ms(2300);
    expect_invalid(a, m.token);
    /* refused from the cached row, without asking the database again */
    assert_int_equal(atomic_load(&lookups), before);
    lease_auth_free(a);
}

/* An unknown id is remembered briefly: repeating it does not reach the
 * database each time. */
static void test_negative_lookups_cached(void **state)
{
    (void)state;
    lease_auth_t *a = new_auth(2000, PEPPER);
    const char *bogus =
        "lsk_key_bbbbbbbbbbbbbbbbbbbbbbbbbb_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
    int before = atomic_load(&lookups);
    int64_t start = lease_mono_now_ns();
    for (int i = 0; i < 200; i++)
        expect_invalid(a, bogus);
    int64_t elapsed_ms = (lease_mono_now_ns() - start) / 1000000;
    int made = atomic_load(&lookups) - before;
    assert_true(made >= 1);
    assert_true(made <= 1 + (int)(elapsed_ms / 1000) + 1);
    lease_auth_free(a);
}

typedef struct worker_arg {
    lease_auth_t *auth;
    const made_t *valid;
    size_t n_valid;
    const char *tampered;
    const char *unknown;
    int iterations;
    bool forgetter; /* also drops valid[0] from the cache now and then */
    int forgets;
    int wrong; /* answers that were not what they should be */
} worker_arg_t;

static void *auth_worker(void *p)
{
    worker_arg_t *w = p;
    for (int i = 0; i < w->iterations; i++) {
        lease_caller_t c;
        lease_code_t code = LEASE_ACQUIRED;
        const made_t *v = &w->valid[(size_t)i % w->n_valid];
        switch (i % 4) {
        case 0:
        case 1:
            if (!authenticate(w->auth, v->token, &c, &code) ||
                strcmp(c.principal.credential_id, v->id) != 0)
                w->wrong++;
            break;
        case 2:
            if (authenticate(w->auth, w->tampered, &c, &code) || code != LEASE_INVALID_CREDENTIAL)
                w->wrong++;
            break;
        default:
            if (authenticate(w->auth, w->unknown, &c, &code) || code != LEASE_INVALID_CREDENTIAL)
                w->wrong++;
            break;
        }
        /* Spread the run over several TTLs so entries expire and are
         * re-fetched while other threads wait on them. */
        if (i % 10 == 9)
            lease_sleep_ms(2);
        if (w->forgetter && i % 100 == 99) {
            lease_auth_forget(w->auth, w->valid[0].id);
            w->forgets++;
        }
    }
    return NULL;
}

static void test_concurrent_authentications(void **state)
{
    (void)state;
    enum { THREADS = 16, ITER = 400, VALID = 3 };
    const int64_t ttl_ms = 20;
    made_t valid[VALID];
    for (int i = 0; i < VALID; i++)
        valid[i] = make_credential(PEPPER, "prn_concurrent", "--tenant", "tenant-main", "--program",
                                   "program-a", "--capability", "targets:lease", NULL);
    char tampered[LEASE_TOKEN_MAX + 1];
    memcpy(tampered, valid[0].token, sizeof tampered);
    tampered[LEASE_TOKEN_MAX - 5] = tampered[LEASE_TOKEN_MAX - 5] == 'A' ? 'B' : 'A';
    const char *unknown =
        "lsk_key_cccccccccccccccccccccccccc_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";

    lease_auth_t *a = new_auth(ttl_ms, PEPPER);
    pthread_t th[THREADS];
    worker_arg_t args[THREADS];
    int before = atomic_load(&lookups);
    int64_t start = lease_mono_now_ns();
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg_t){a, valid, VALID, tampered, unknown, ITER, i == 0, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, auth_worker, &args[i]), 0);
    }
    int wrong = 0, forgets = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        wrong += args[i].wrong;
        forgets += args[i].forgets;
    }
    int64_t elapsed_ms = (lease_mono_now_ns() - start) / 1000000;
    int made = atomic_load(&lookups) - before;
    assert_int_equal(wrong, 0);
    /* 4 distinct ids (the tampered token shares valid[0]'s), each fetched
     * at most once per TTL (plus once per forget); without the cache and its
     * single-flight it would be up to THREADS*ITER. The run spans several
     * TTLs, so entries were re-fetched under contention. */
    int bound = 4 * (int)(2 + elapsed_ms / ttl_ms) + forgets;
    fprintf(stderr, "concurrent: %d authentications in %lld ms, %d lookups (bound %d)\n",
            THREADS * ITER, (long long)elapsed_ms, made, bound);
    assert_true(elapsed_ms > 2 * ttl_ms);
    assert_true(made > 4);
    assert_true(made <= bound);
    lease_auth_free(a);
}

/* The credentials stored: rows of lease.credentials (Postgres); on Valkey
 * the credential hashes, which must be as many as the credential set's
 * members (docs/backends.md "Keys": each create writes both). */
static long long credential_rows(void)
{
    if (!on_valkey)
        return testpg_query_int(db_url, "SELECT count(*) FROM lease.credentials");
    char pattern[128], set[128];
    http_fx_valkey_key(pattern, sizeof pattern, "cred:*");
    http_fx_valkey_key(set, sizeof set, "creds");
    const char *count_keys[] = {"EVAL", "return #redis.call('KEYS', ARGV[1])", "0", pattern, NULL};
    const char *members[] = {"SCARD", set, NULL};
    long long keys = valkey_cli_int(count_keys);
    assert_int_equal(valkey_cli_int(members), keys);
    return keys;
}

/* Bad input is refused with a typed exit status and stores nothing. */
static void test_cli_rejects_bad_input_and_stores_nothing(void **state)
{
    (void)state;
    long long before = credential_rows();
    char *out = NULL;
    int rc_tmp;
    /* each case's stdout must be empty: nothing was created, no token */
#define CREATE(...)                                                                                \
    (rc_tmp = leasectl(&out, NULL, "credential", "create", "--principal", "prn_bad", "--client",   \
                       "c1", __VA_ARGS__, NULL),                                                   \
     assert_string_equal(out, ""), free(out), out = NULL, rc_tmp)
    struct {
        int rc;
    } r[16];
    int n = 0;
    r[n++].rc =
        CREATE("--tenant", "tenant/main", "--program", "p", "--capability", "targets:lease");
    r[n++].rc = CREATE("--tenant", "t", "--program", "*", "--capability", "targets:lease");
    r[n++].rc = CREATE("--tenant", "t", "--program", "p", "--capability", "targets:revoke");
    r[n++].rc = CREATE("--tenant", "t", "--program", "p", "--capability", "targets:force-release");
    r[n++].rc = CREATE("--tenant", "t", "--program", "p", "--capability", "targets:everything");
    r[n++].rc = CREATE("--tenant", "t", "--program", "p", "--capability", "targets:lease",
                       "--actor", "Bad Actor");
    r[n++].rc = CREATE("--tenant", "t", "--program", "p", "--capability", "targets:lease",
                       "--actor", "*", "--actor", "a");
    r[n++].rc = CREATE("--tenant", "t", "--program", "p", "--capability", "targets:lease",
                       "--expires-in", "0s");
    r[n++].rc = CREATE("--tenant", "t", "--program", "p", "--capability", "targets:lease",
                       "--expires-in", "tomorrow");
    r[n++].rc = CREATE("--tenant", "", "--program", "p", "--capability", "targets:lease");
    for (int i = 0; i < n; i++) {
        if (r[i].rc != 65)
            fprintf(stderr, "bad-input case %d exited %d\n", i, r[i].rc);
        assert_int_equal(r[i].rc, 65);
    }
    /* missing required flags are usage errors */
    assert_int_equal(leasectl(&out, NULL, "credential", "create", "--principal", "p", "--client",
                              "c", "--tenant", "t", "--program", "p", NULL),
                     2);
    free(out);
    assert_int_equal(leasectl(&out, NULL, "credential", "frobnicate", NULL), 2);
    free(out);
    /* the service login role may not administer credentials (PostgreSQL's
     * roles: on Valkey there is no such role, the server's ACL user of
     * leased may call every function of the library, credential_create
     * among them; docs/backends.md "Credentials and TLS") */
    if (!on_valkey) {
        assert_int_equal(leasectl_as_service(&out, NULL, "credential", "create", "--principal", "p",
                                             "--client", "c", "--tenant", "t", "--program", "p",
                                             "--capability", "targets:lease", NULL),
                         77);
        assert_string_equal(out, ""); /* and no token was printed */
        free(out);
        assert_int_equal(leasectl_as_service(&out, NULL, "credential", "list", NULL), 77);
        free(out);
    }
    assert_int_equal(credential_rows(), before);

    /* revoking an id that does not exist */
    assert_int_equal(
        leasectl(&out, NULL, "credential", "revoke", "key_zzzzzzzzzzzzzzzzzzzzzzzzzz", NULL), 1);
    assert_non_null(strstr(out, "\"revoked\":false"));
    free(out);
#undef CREATE
}

/* A plain login role in lease_admin (whose default isolation is READ
 * COMMITTED) can administer credentials: leasectl opens its own
 * SERIALIZABLE transaction, which the SQL functions insist on. */
static void test_lease_admin_role_administers(void **state)
{
    (void)state;
    assert_true(testpg_exec(db_url, "DO $$ BEGIN "
                                    "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                                    "'race_cred_admin') THEN "
                                    "CREATE ROLE race_cred_admin LOGIN IN ROLE lease_admin; "
                                    "END IF; END $$"));
    char *isolation = testpg_query_value(db_url, "SELECT current_setting('transaction_isolation')");
    assert_non_null(isolation);
    assert_string_not_equal(isolation, "serializable");
    free(isolation);

    char *admin_url = testpg_url_as(db_url, "race_cred_admin");
    char *out = NULL;
    long long before = credential_rows();
    const char *args[] = {"credential", "create",    "--principal",  "prn_by_role",
                          "--client",   "c1",        "--tenant",     "tenant-main",
                          "--program",  "program-a", "--capability", "targets:read"};
    int rc = leasectl_run(admin_url, &out, NULL, args, sizeof args / sizeof args[0]);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"token\":\"lsk_key_"));
    free(out);
    assert_int_equal(credential_rows(), before + 1);
    const char *list[] = {"credential", "list"};
    assert_int_equal(leasectl_run(admin_url, &out, NULL, list, 2), 0);
    assert_non_null(strstr(out, "prn_by_role"));
    free(out);
    free(admin_url);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_digest_is_stored),
        cmocka_unit_test(test_cli_rejects_bad_input_and_stores_nothing),
        cmocka_unit_test(test_lease_admin_role_administers),
        cmocka_unit_test(test_valid_token_accepted_with_its_scope),
        cmocka_unit_test(test_tampered_and_unknown_rejected),
        cmocka_unit_test(test_revocation_visible_within_ttl),
        cmocka_unit_test(test_expired_rejected_even_when_cached),
        cmocka_unit_test(test_negative_lookups_cached),
        cmocka_unit_test(test_concurrent_authentications),
    };
    static const http_pg_only_t pg_only[] = {
        {"test_lease_admin_role_administers",
         "a PostgreSQL login role in lease_admin and its default isolation level: Valkey has "
         "neither roles nor isolation levels"},
        {NULL, NULL},
    };
    return http_fx_run_group("race_auth_cache", tests, sizeof tests / sizeof tests[0], group_setup,
                             group_teardown, pg_only);
}
