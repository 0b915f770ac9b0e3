/*
 * http_executor.c - the executor end to end: the real leased over loopback
 * HTTP, the real leasectl binary, real child processes, the throwaway
 * Postgres. Lease loss must reach the command's cancellation path, and
 * request ids must resolve unknown outcomes:
 *
 *  (a) force-release under `run`: SIGTERM within one renewal interval plus
 *      margin, exit 76, and a commit with the old token is lease_lost;
 *  (b) the database stops under `run`: the command is cancelled before the
 *      lease's expires_at;
 *  (c) keep-alive answers of run's session delayed past their local
 *      deadline (a slow TCP proxy, tests/harness/tcp_proxy.c) do not extend
 *      local authority;
 *  (d) normal completion releases at once and passes the command's code;
 *  (e) acquire outcome unknown (answer dropped by the proxy; backends
 *      terminated mid-call) resolves by request id: never two leases,
 *      never a lost one;
 *  (f) leasectl client commands' JSON and exit codes;
 *  (g) a fenced commit from inside `run` needs no identity flags.
 *
 * The whole cluster stops in (b), so ctest runs (b) alone, as a test of its
 * own (http_executor_outage: this program with the argument "outage",
 * RUN_SERIAL), and the other cases beside other tests (http_executor).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "exec_common.h"
#include "http_common.h"
#include "lease/client.h"
#include "lease/clock.h"
#include "tcp_proxy.h"
#include "test_wait.h"

#define WORKFLOW "default"
/* How long a wait for a state may take before the test gives up. Only a
 * broken build uses it up: nothing here asserts on elapsed time. A case
 * whose point is "before expiry" compares wall times written down by the
 * parties (the command, Postgres), not the test's own stopwatch. */
#define PATIENCE_MS 30000

static const char *skipped; /* why a case could not run (the test then exits 77) */

/* ------------------------------------------------------------------ */
/* The service: the http_common.h fixture                              */

static http_fx_t fx;
static const char *worker_token; /* targets:lease, targets:read; owned by fx */
static const char *admin_token;  /* admin: force-release, revoke, read, audit:read; owned by fx */

static uint16_t service_port(void)
{
    return (uint16_t)leased_proc_port(fx.srv);
}

/* Waits until /readyz answers 200 (after the cluster comes back). */
static void service_wait_ready(int64_t timeout_ms)
{
    lease_client_t *c = lease_client_new(fx.base, NULL);
    assert_non_null(c);
    lease_deadline_t until = lease_deadline_in(timeout_ms);
    lease_code_t code = LEASE_BACKEND_UNAVAILABLE;
    while (!lease_deadline_passed(&until)) {
        lease_client_health_t h;
        lease_client_call_t call = {.deadline_ms = 1000};
        if ((code = lease_client_health(c, true, &call, &h)) == LEASE_INSPECTED)
            break;
        lease_sleep_ms(100);
    }
    lease_client_free(c);
    assert_int_equal(code, LEASE_INSPECTED);
}

/* ------------------------------------------------------------------ */
/* Processes (exec_common.h)                                           */

/* `leasectl run` of child_script on target with ttl_ms, against url. */
static proc_t run_start(const char *target, const char *ttl_ms, const char *url)
{
    const char *args[] = {"run",     "--tenant", TENANT,       "--program",  PROGRAM, "--namespace",
                          NAMESPACE, "--target", target,       "--actor",    ACTOR,   "--workflow",
                          WORKFLOW,  "--ttl-ms", ttl_ms,       "--grace-ms", "2000",  "--",
                          "sh",      "-c",       child_script, NULL};
    proc_t p = ctl_start(args, url, worker_token, NULL);
    if (!wait_file(&p, "env", PATIENCE_MS)) {
        char *err = proc_file(&p, "err");
        fail_msg("the command never started under run; stderr:\n%s", err ? err : "");
    }
    return p;
}

/* An integer from the test database (superuser). */
static long long sql_int(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long long sql_int(const char *fmt, ...)
{
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return testpg_query_int(fx.db, sql);
}

/* ------------------------------------------------------------------ */
/* (a) force-release under run                                         */

static void force_release_cancels_the_command(void **state)
{
    (void)state;
    proc_t run = run_start("exec-a", "3000", fx.base);
    char *lease_id = env_value(&run, "LEASE_ID");

    /* past one TTL the command still runs: its session's keep-alives keep
     * the lease (the lease is active at a database time past its first
     * expiry) */
    char alive[512];
    snprintf(alive, sizeof alive,
             "SELECT count(*) FROM lease.active_leases WHERE lease_id = '%s' AND "
             "now() > acquired_at + interval '3000 ms'",
             lease_id);
    assert_true(test_wait_until(PATIENCE_MS, testpg_query_int(fx.db, alive) == 1));
    assert_false(wait_file(&run, "term", 0));
    assert_int_equal(waitpid(run.pid, NULL, WNOHANG), 0);

    const char *force[] = {"force-release", "--tenant",    TENANT,     "--program",
                           PROGRAM,         "--namespace", NAMESPACE,  "--target",
                           "exec-a",        "--actor",     ACTOR,      "--workflow",
                           WORKFLOW,        "--reason",    "test (a)", NULL};
    json_t *answer;
    assert_int_equal(ctl(force, fx.base, admin_token, NULL, &answer), 0);
    int64_t released_at = lease_mono_now_ns();
    assert_string_equal(json_string_value(json_object_get(answer, "code")), "lease_released");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(answer, "lease"), "lease_id")), lease_id);
    json_decref(answer);

    /* the next renewal answers lease_lost and that answer cancels the
     * command: the cause is the refusal ("lost"), not the local cancel
     * point a third of a TTL later ("unconfirmed") */
    assert_true(wait_file(&run, "term", PATIENCE_MS));
    int64_t took_ms = (lease_mono_now_ns() - released_at) / 1000000;
    print_message("force-release to SIGTERM: %lld ms (information only)\n", (long long)took_ms);
    assert_int_equal(proc_wait(&run, PATIENCE_MS), 76);
    char *lost = proc_file(&run, "err");
    assert_non_null(strstr(lost, ": lost (lease_lost)"));
    assert_null(strstr(lost, "unconfirmed"));
    free(lost);

    /* the command's commit with the old lease is fenced off */
    char env[16][160];
    const char *extra[17];
    const char *keys[] = {"LEASE_ID",         "LEASE_FENCING_TOKEN",       "LEASE_EXECUTION_ID",
                          "LEASE_TRACE_ID",   "LEASE_SERVICE_INSTANCE_ID", "LEASE_TENANT_ID",
                          "LEASE_PROGRAM_ID", "LEASE_TARGET_NAMESPACE",    "LEASE_TARGET_ID",
                          "LEASE_ACTOR_NAME", "LEASE_WORKFLOW_NAME",       "LEASE_OPERATION_CLASS"};
    size_t n = sizeof keys / sizeof keys[0];
    for (size_t i = 0; i < n; i++) {
        char *v = env_value(&run, keys[i]);
        snprintf(env[i], sizeof env[i], "%s=%s", keys[i], v);
        extra[i] = env[i];
        free(v);
    }
    extra[n] = NULL;
    const char *commit[] = {"commit", "--document", "doc-a",     "--expected-revision",
                            "0",      "--body",     "{\"v\":1}", NULL};
    assert_int_equal(ctl(commit, fx.base, worker_token, extra, &answer), 1);
    assert_string_equal(json_string_value(json_object_get(answer, "code")), "lease_lost");
    json_decref(answer);
    assert_true(sql_int("SELECT count(*) FROM lease.fenced_documents WHERE document_key = '%s'",
                        "doc-a") == 0);
    assert_true(sql_int("SELECT count(*) FROM lease.lease_history WHERE lease_id = '%s' "
                        "AND state = 'released' AND end_reason = 'test (a)'",
                        lease_id) == 1);
    free(lease_id);
    proc_cleanup(&run);
}

/* ------------------------------------------------------------------ */
/* (b) the database stops under run                                    */

static void database_outage_cancels_before_expiry(void **state)
{
    (void)state;
    if (!testpg_owned()) {
        skipped = "(b) needs the test-owned cluster (LEASE_TEST_DATABASE_URL is set)";
        return;
    }
    proc_t run = run_start("exec-b", "4000", fx.base);
    char *lease_id = env_value(&run, "LEASE_ID");

    /* Stop the database after a keep-alive of the lease's session (so the
     * command has outlived its first grant through the service: its
     * expires_at moved on); the expiry to beat is read after the outage. */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT (extract(epoch FROM expires_at) * 1000)::bigint FROM lease.active_leases "
             "WHERE lease_id = '%s'",
             lease_id);
    long long first = testpg_query_int(fx.db, sql);
    assert_true(test_wait_until(PATIENCE_MS, testpg_query_int(fx.db, sql) != first));
    assert_true(testpg_pause());
    int64_t paused_at = lease_mono_now_ns();

    bool cancelled = wait_file(&run, "term", PATIENCE_MS);
    int64_t took_ms = (lease_mono_now_ns() - paused_at) / 1000000;
    assert_true(testpg_resume());
    assert_true(cancelled);
    assert_int_equal(proc_wait(&run, PATIENCE_MS), 76);
    /* The last expiry the service granted, read once the database is back
     * and leasectl has exited. Read before the stop (as this test once
     * did), it misses a renewal that commits and is answered while the
     * stop is still under way (pg_ctl took 1.4 s on the loaded machine,
     * a renewal comes every 1.3 s), and the command then rightly outlives
     * the expiry read. The command must have been told to stop before it. */
    long long expires_at = sql_int("SELECT (extract(epoch FROM max(expires_at)) * 1000)::bigint "
                                   "FROM (SELECT expires_at FROM lease.active_leases WHERE "
                                   "lease_id = '%s' UNION ALL SELECT expires_at FROM "
                                   "lease.lease_history WHERE lease_id = '%s') e",
                                   lease_id, lease_id);
    char *term = proc_file(&run, "term");
    long long term_wall_ms = atoll(term);
    free(term);
    print_message("database stopped to SIGTERM: %lld ms; SIGTERM %lld ms before expires_at\n",
                  (long long)took_ms, expires_at - term_wall_ms);
    assert_true(term_wall_ms < expires_at);
    char *err = proc_file(&run, "err");
    assert_non_null(strstr(err, "unconfirmed"));
    free(err);
    free(lease_id);
    proc_cleanup(&run);
    service_wait_ready(60000);
}

/* ------------------------------------------------------------------ */
/* (c) late renewal answers                                            */

static void late_renewals_do_not_extend_authority(void **state)
{
    (void)state;
    tcp_proxy_t px;
    assert_true(tcp_proxy_start(&px, service_port()));
    char url[64];
    tcp_proxy_url(&px, url, sizeof url);
    /* 9 s grant from the session's open sent at S: cancel point C = S +
     * 8.1 s (margin 10 %), keep-alive R = S + 3 s +- 0.3 s, its answer
     * deadline halfway to C (R + 2.4..2.7 s). Answers delayed by 2.8 s
     * arrive after that deadline but, with up to 2 s of service time to
     * spare, before the call itself gives up at C; the keep-alive that
     * follows at once cannot be answered before C at all. */
    proc_t run = run_start("exec-c", "9000", url);
    char *lease_id = env_value(&run, "LEASE_ID");
    char session_sql[256];
    snprintf(session_sql, sizeof session_sql,
             "SELECT session_id FROM lease.active_leases WHERE lease_id = '%s'", lease_id);
    char *session_id = testpg_query_value(fx.db, session_sql);
    assert_non_null(session_id);
    assert_true(session_id[0] != '\0'); /* run holds its lease in a session */

    atomic_store(&px.delay_ms, 2800);
    int64_t delayed_at = lease_mono_now_ns();
    int64_t delayed_wall = lease_wall_now_ms();

    assert_true(wait_file(&run, "term", PATIENCE_MS));
    int64_t took_ms = (lease_mono_now_ns() - delayed_at) / 1000000;
    print_message("answers delayed to SIGTERM: %lld ms (information only)\n", (long long)took_ms);
    assert_int_equal(proc_wait(&run, PATIENCE_MS), 76);
    tcp_proxy_stop(&px);
    /* stopped before the first grant ran out although the service did
     * extend the lease: the late answer granted nothing locally */
    char *term = proc_file(&run, "term");
    long long term_wall_ms = atoll(term);
    free(term);
    assert_true(term_wall_ms <
                sql_int("SELECT (extract(epoch FROM acquired_at) * 1000)::bigint + 9000 FROM ("
                        "SELECT acquired_at FROM lease.lease_history WHERE lease_id = '%s' UNION "
                        "ALL SELECT acquired_at FROM lease.active_leases WHERE lease_id = '%s') a "
                        "LIMIT 1",
                        lease_id, lease_id));

    char *err = proc_file(&run, "err");
    assert_non_null(strstr(err, "after its local deadline"));
    assert_non_null(strstr(err, "unconfirmed"));
    free(err);
    /* the service did grant the late keep-alive: only the answer was late */
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (extract(epoch FROM renewed_at) * 1000)::bigint FROM lease.sessions "
             "WHERE session_id = '%s'",
             session_id);
    assert_true(testpg_query_int(fx.db, sql) > delayed_wall);
    free(session_id);
    free(lease_id);
    proc_cleanup(&run);
}

/* ------------------------------------------------------------------ */
/* (d) normal completion                                               */

static int run_command(const char *target, const char *script)
{
    const char *args[] = {"run",         "--tenant",   TENANT,     "--program", PROGRAM,
                          "--namespace", NAMESPACE,    "--target", target,      "--actor",
                          ACTOR,         "--workflow", WORKFLOW,   "--ttl-ms",  "3000",
                          "--",          "sh",         "-c",       script,      NULL};
    return ctl(args, fx.base, worker_token, NULL, NULL);
}

static void completion_releases_and_passes_the_code(void **state)
{
    (void)state;
    /* outlives one TTL, so it also needs the renewals */
    const char *args[] = {"run",
                          "--tenant",
                          TENANT,
                          "--program",
                          PROGRAM,
                          "--namespace",
                          NAMESPACE,
                          "--target",
                          "exec-d",
                          "--actor",
                          ACTOR,
                          "--workflow",
                          WORKFLOW,
                          "--ttl-ms",
                          "3000",
                          "--",
                          "sh",
                          "-c",
                          "env | grep '^LEASE_' > \"$TEST_DIR/env\"; sleep 3.5; exit 7",
                          NULL};
    proc_t run = ctl_start(args, fx.base, worker_token, NULL);
    assert_int_equal(proc_wait(&run, 20000), 7);
    char *lease_id = env_value(&run, "LEASE_ID");
    char *token = env_value(&run, "LEASE_FENCING_TOKEN");
    proc_cleanup(&run);

    /* released, not left to expire: another worker acquires at once */
    const char *acquire[] = {
        "acquire", "--tenant",           TENANT,    "--program", PROGRAM, "--namespace",
        NAMESPACE, "--target",           "exec-d",  "--actor",   ACTOR,   "--workflow",
        WORKFLOW,  "--service-instance", "other-1", NULL};
    json_t *answer;
    assert_int_equal(ctl(acquire, fx.base, worker_token, NULL, &answer), 0);
    json_t *lease = json_object_get(answer, "lease");
    assert_int_equal(json_integer_value(json_object_get(lease, "fencing_token")), atoll(token) + 1);
    json_decref(answer);
    assert_true(sql_int("SELECT count(*) FROM lease.lease_history WHERE lease_id = '%s' "
                        "AND state = 'released' AND ended_at < expires_at",
                        lease_id) == 1);
    free(lease_id);
    free(token);

    assert_int_equal(run_command("exec-d2", "exit 0"), 0);
    assert_int_equal(run_command("exec-d2", "exit 3"), 3);
    assert_int_equal(run_command("exec-d2", "kill -TERM $$"), 128 + SIGTERM);
    assert_true(sql_int("SELECT count(*) FROM lease.lease_history WHERE target_id = '%s' "
                        "AND state = 'released'",
                        "exec-d2") == 3);
}

/* ------------------------------------------------------------------ */
/* (g) commit from inside run                                          */

static void commit_inside_run_needs_no_identity_flags(void **state)
{
    (void)state;
    /* the command commits twice with the environment run gave it: the
     * first is accepted, the second (same expected revision) conflicts */
    static const char script[] =
        "env | grep '^LEASE_' > \"$TEST_DIR/env\"\n"
        "leasectl commit --document doc-g --expected-revision 0 --body '{\"ok\":true}' "
        "--publication results --payload '{\"doc\":\"doc-g\"}' > \"$TEST_DIR/term\" || exit 10\n"
        "leasectl commit --document doc-g --expected-revision 0 --body '{\"ok\":false}'\n"
        "[ $? -eq 1 ] || exit 11\n";
    const char *args[] = {"run",     "--tenant", TENANT,   "--program", PROGRAM, "--namespace",
                          NAMESPACE, "--target", "exec-g", "--actor",   ACTOR,   "--workflow",
                          WORKFLOW,  "--",       "sh",     "-c",        script,  NULL};
    proc_t run = ctl_start(args, fx.base, worker_token, NULL);
    assert_int_equal(proc_wait(&run, 30000), 0);
    char *answer_text = proc_file(&run, "term");
    json_t *answer = json_loads(answer_text, 0, NULL);
    free(answer_text);
    assert_string_equal(json_string_value(json_object_get(answer, "code")), "commit_accepted");
    json_decref(answer);
    char *lease_id = env_value(&run, "LEASE_ID");
    char *token = env_value(&run, "LEASE_FENCING_TOKEN");
    char *execution = env_value(&run, "LEASE_EXECUTION_ID");
    /* written once, by this lease, its token and its execution */
    assert_true(sql_int("SELECT count(*) FROM lease.fenced_documents WHERE document_key = "
                        "'doc-g' AND lease_id = '%s' AND fencing_token = %s AND execution_id = "
                        "'%s' AND revision = 1 AND body = '{\"ok\":true}'",
                        lease_id, token, execution) == 1);
    assert_true(sql_int("SELECT count(*) FROM lease.outbox WHERE topic = 'results' AND "
                        "lease_id = '%s' AND fencing_token = %s",
                        lease_id, token) == 1);
    free(lease_id);
    free(token);
    free(execution);
    proc_cleanup(&run);
}

/* ------------------------------------------------------------------ */
/* (e) outcome unknown during acquire                                  */

static void dropped_answer_resolves_by_request_id(void **state)
{
    (void)state;
    tcp_proxy_t px;
    assert_true(tcp_proxy_start(&px, service_port()));
    char url[64];
    tcp_proxy_url(&px, url, sizeof url);
    atomic_store(&px.drop, 1);
    const char *acquire[] = {"acquire",     "--tenant",   TENANT,     "--program", PROGRAM,
                             "--namespace", NAMESPACE,    "--target", "exec-e1",   "--actor",
                             ACTOR,         "--workflow", WORKFLOW,   NULL};
    json_t *answer;
    assert_int_equal(ctl(acquire, url, worker_token, NULL, &answer), 0);
    assert_int_equal(atomic_load(&px.drop), 0); /* the first answer was swallowed */
    tcp_proxy_stop(&px);
    assert_true(json_is_true(json_object_get(answer, "replayed")));
    json_t *lease = json_object_get(answer, "lease");
    assert_int_equal(json_integer_value(json_object_get(lease, "fencing_token")), 1);
    const char *lease_id = json_string_value(json_object_get(lease, "lease_id"));
    assert_true(
        sql_int("SELECT count(*) FROM lease.active_leases WHERE lease_id = '%s'", lease_id) == 1);
    assert_true(sql_int("SELECT max(fencing_counter) FROM lease.fencing_counters "
                        "WHERE target_id = '%s'",
                        "exec-e1") == 1);
    json_decref(answer);
    /* and it is held: a new request id conflicts */
    assert_int_equal(ctl(acquire, fx.base, worker_token, NULL, NULL), 75);
}

typedef struct chaos {
    atomic_bool stop;
    atomic_int kills;  /* backends terminated */
    atomic_int rounds; /* termination queries run */
} chaos_t;

static void *chaos_main(void *arg)
{
    chaos_t *ch = arg;
    char *name = testpg_query_value(fx.db, "SELECT current_database()");
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE datname = '%s' AND usename = 'leased_app' AND pid <> pg_backend_pid()",
             name);
    while (!atomic_load(&ch->stop)) {
        atomic_fetch_add(&ch->kills, (int)testpg_query_int(fx.db, sql));
        atomic_fetch_add(&ch->rounds, 1);
        lease_sleep_ms(3 + (int64_t)lease_jitter(20)); /* spreads the kills: workload, not sync */
    }
    free(name);
    return NULL;
}

static void terminated_backends_never_lose_or_double_a_lease(void **state)
{
    (void)state;
    /* at least N_MIN acquires, and more (up to N_MAX) until a backend was
     * terminated while they ran: on a loaded machine 24 acquires can be
     * over before the chaos thread first runs (it once killed nothing) */
    enum { N_MIN = 24, N_MAX = 200 };
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    assert_non_null(c);
    chaos_t ch = {0};
    pthread_t t;
    pthread_create(&t, NULL, chaos_main, &ch);
    assert_true(test_wait_until(PATIENCE_MS, atomic_load(&ch.rounds) > 0));
    int kills_before = atomic_load(&ch.kills); /* idle sessions of earlier cases */
    static char targets[N_MAX][32], request_ids[N_MAX][LEASE_ID_MAX + 1];
    static lease_code_t codes[N_MAX];
    static char lease_ids[N_MAX][LEASE_ID_MAX + 1];
    int unknown = 0, n = 0;
    for (int i = 0; i < N_MAX && (i < N_MIN || atomic_load(&ch.kills) == kills_before); i++, n++) {
        snprintf(targets[i], sizeof targets[i], "exec-e2-%d", i);
        lease_client_acquire_t req = {
            .identity = {TENANT, PROGRAM, NAMESPACE, targets[i], ACTOR, WORKFLOW, NULL},
            .service_instance_id = "chaos-1",
            .execution_id = "exec_chaos",
            .job_id = "job_chaos",
        };
        lease_client_call_t call = {.deadline_ms = 1500};
        lease_result_t res;
        codes[i] = lease_client_acquire(c, &req, &call, &res);
        snprintf(request_ids[i], sizeof request_ids[i], "%s", call.request_id_used);
        snprintf(lease_ids[i], sizeof lease_ids[i], "%s", res.has_lease ? res.lease.lease_id : "");
        unknown += codes[i] == LEASE_OUTCOME_UNKNOWN;
        /* only typed outcomes, never a guess */
        assert_true(codes[i] == LEASE_ACQUIRED || codes[i] == LEASE_OUTCOME_UNKNOWN ||
                    codes[i] == LEASE_BACKEND_UNAVAILABLE || codes[i] == LEASE_DEADLINE_EXCEEDED);
    }
    int kills_during = atomic_load(&ch.kills) - kills_before;
    atomic_store(&ch.stop, true);
    pthread_join(t, NULL);
    print_message("backends terminated during the acquires: %d; outcomes unknown: %d of %d\n",
                  kills_during, unknown, n);
    assert_true(kills_during > 0);

    for (int i = 0; i < n; i++) {
        long long active =
            sql_int("SELECT count(*) FROM lease.active_leases WHERE target_id = '%s'", targets[i]);
        if (codes[i] == LEASE_ACQUIRED) {
            /* never lost: the lease the client holds is the active one */
            assert_true(sql_int("SELECT count(*) FROM lease.active_leases WHERE lease_id = "
                                "'%s'",
                                lease_ids[i]) == 1);
        } else if (codes[i] != LEASE_OUTCOME_UNKNOWN) {
            /* a definite "not done" must be true */
            assert_int_equal(active, 0);
        }
        /* the same request id, calmly, tells what happened */
        lease_client_acquire_t req = {
            .identity = {TENANT, PROGRAM, NAMESPACE, targets[i], ACTOR, WORKFLOW, NULL},
            .service_instance_id = "chaos-1",
            .execution_id = "exec_chaos",
            .job_id = "job_chaos",
        };
        lease_client_call_t call = {.request_id = request_ids[i], .deadline_ms = 5000};
        lease_result_t res;
        assert_int_equal(lease_client_acquire(c, &req, &call, &res), LEASE_ACQUIRED);
        if (codes[i] == LEASE_ACQUIRED)
            assert_string_equal(res.lease.lease_id, lease_ids[i]);
        assert_int_equal(res.lease.fencing_token, 1);
        /* never two: one allocation per identity, one active lease */
        assert_int_equal(sql_int("SELECT max(fencing_counter) FROM lease.fencing_counters "
                                 "WHERE target_id = '%s'",
                                 targets[i]),
                         1);
        assert_true(sql_int("SELECT count(*) FROM lease.active_leases WHERE lease_id = '%s'",
                            res.lease.lease_id) == 1);
    }
    lease_client_free(c);
}

/* ------------------------------------------------------------------ */
/* (f) client commands                                                 */

static void client_commands_answer_json_and_exit_codes(void **state)
{
    (void)state;
#define IDF                                                                                        \
    "--tenant", TENANT, "--program", PROGRAM, "--namespace", NAMESPACE, "--actor", ACTOR,          \
        "--workflow", WORKFLOW
    const char *acquire[] = {"acquire", IDF,        "--target", "cli-f", "--service-instance",
                             "cli-1",   "--ttl-ms", "20000",    NULL};
    json_t *a;
    assert_int_equal(ctl(acquire, fx.base, worker_token, NULL, &a), 0);
    assert_string_equal(json_string_value(json_object_get(a, "code")), "lease_acquired");
    json_t *lease = json_object_get(a, "lease");
    char lease_id[LEASE_ID_MAX + 1], token[24];
    snprintf(lease_id, sizeof lease_id, "%s",
             json_string_value(json_object_get(lease, "lease_id")));
    snprintf(token, sizeof token, "%lld",
             (long long)json_integer_value(json_object_get(lease, "fencing_token")));
    json_decref(a);

    json_t *b;
    assert_int_equal(ctl(acquire, fx.base, worker_token, NULL, &b), 75);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_conflict");
    json_decref(b);
    assert_int_equal(ctl(acquire, fx.base, "lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_bogus", NULL, &b),
                     77);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "invalid_credential");
    json_decref(b);
    const char *bad[] = {"acquire", IDF, "--target", "bad/target", NULL};
    assert_int_equal(ctl(bad, fx.base, worker_token, NULL, &b), 65);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "invalid_lease_request");
    json_decref(b);
    assert_int_equal(ctl(acquire, "http://127.0.0.1:1", worker_token, NULL, &b), 69);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_backend_unavailable");
    json_decref(b);
    const char *usage[] = {"acquire", "--tenant", TENANT, NULL};
    assert_int_equal(ctl(usage, fx.base, worker_token, NULL, NULL), 2);

    const char *renew[] = {
        "renew",           IDF,   "--target",           "cli-f", "--lease-id", lease_id,
        "--fencing-token", token, "--service-instance", "cli-1", NULL};
    assert_int_equal(ctl(renew, fx.base, worker_token, NULL, &b), 0);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_renewed");
    json_decref(b);
    const char *stale[] = {
        "renew",           IDF,   "--target",           "cli-f", "--lease-id", lease_id,
        "--fencing-token", token, "--service-instance", "cli-2", NULL};
    assert_int_equal(ctl(stale, fx.base, worker_token, NULL, &b), 1);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_lost");
    json_decref(b);

    const char *inspect[] = {"inspect", "--lease-id", lease_id, NULL};
    assert_int_equal(ctl(inspect, fx.base, worker_token, NULL, &b), 0);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_inspected");
    json_decref(b);
    const char *list[] = {"list", "--by", "target", IDF, "--target", "cli-f", NULL};
    assert_int_equal(ctl(list, fx.base, worker_token, NULL, &b), 0);
    assert_int_equal(json_array_size(json_object_get(b, "leases")), 1);
    json_decref(b);

    const char *release[] = {
        "release",         IDF,   "--target",           "cli-f", "--lease-id", lease_id,
        "--fencing-token", token, "--service-instance", "cli-1", NULL};
    assert_int_equal(ctl(release, fx.base, worker_token, NULL, &b), 0);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_released");
    json_decref(b);
    const char *inspect_id[] = {"inspect", IDF, "--target", "cli-f", NULL};
    assert_int_equal(ctl(inspect_id, fx.base, worker_token, NULL, &b), 1);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_not_found");
    json_decref(b);
#undef IDF
}

static int group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN); /* the proxy writes to sockets that may close */
    http_fx_open(&fx, state, "executor");
    http_fx_serve(&fx, NULL);
    worker_token = http_fx_worker(&fx, "prn_executor");
    admin_token =
        http_fx_credential(&fx, "prn_operator", "*",
                           "targets:force-release,targets:revoke,targets:read,audit:read", true);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest beside_others[] = {
        cmocka_unit_test(client_commands_answer_json_and_exit_codes),
        cmocka_unit_test(force_release_cancels_the_command),
        cmocka_unit_test(completion_releases_and_passes_the_code),
        cmocka_unit_test(commit_inside_run_needs_no_identity_flags),
        cmocka_unit_test(late_renewals_do_not_extend_authority),
        cmocka_unit_test(dropped_answer_resolves_by_request_id),
        cmocka_unit_test(terminated_backends_never_lose_or_double_a_lease),
    };
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(database_outage_cancels_before_expiry),
    };
    int failed;
    if (argc == 1)
        failed = cmocka_run_group_tests(beside_others, group_setup, http_fx_teardown);
    else if (argc == 2 && strcmp(argv[1], "outage") == 0)
        failed = cmocka_run_group_tests(alone, group_setup, http_fx_teardown);
    else {
        fprintf(stderr, "usage: %s [outage]\n", argv[0]);
        return 2;
    }
    if (failed)
        return 1;
    if (skipped) {
        printf("skipped: %s\n", skipped);
        return 77;
    }
    return 0;
}
