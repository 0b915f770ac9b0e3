/*
 * http_run_session.c - `leasectl run` holds its lease in a session (issue
 * 37), and the command is cancelled when the session ends from outside;
 * `leasectl session close`. The real leased, leasectl, child processes and
 * the throwaway Postgres:
 *
 *  1. `leasectl session list` (an operator's read of lease.active_sessions)
 *     shows run's session with its tenant, TTL, time left and one lease,
 *     under its tenant and not another's, and no more once it is closed;
 *     the session closed from outside (`leasectl session close`, the same
 *     credential): SIGTERM to the command, run exits 76; the close printed
 *     lease_released with leases_ended 1 and exited 0; closing it again
 *     with another request id is lease_lost (exit 1);
 *  2. run frozen (SIGSTOP) past its session's TTL: the session expires at
 *     the service (the lease is expired there); resumed, run finds its
 *     window passed without a confirmed keep-alive, cancels the command
 *     and exits 76;
 *  3. `leasectl session close` of a malformed id is invalid_lease_request
 *     (exit 65), changing nothing.
 */
#include "exec_common.h"

#define PATIENCE_MS 30000
#define TTL "1500"

static http_fx_t fx;
static const char *worker_token; /* owned by fx */

static int group_setup(void **state)
{
    http_fx_open(&fx, state, "http_run_session");
    worker_token = http_fx_worker(&fx, "prn_run_session");
    /* the watch polls once a minute: the session's keep-alive is what
     * tells run (case 2: the watch would also see the expiry) */
    const char *env[] = {"LEASE_WATCH_LISTEN=false", "LEASE_WATCH_POLL_MS=60000", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

static proc_t run_start(const char *target)
{
    const char *args[] = {"run",     "--tenant", TENANT,       "--program",  PROGRAM, "--namespace",
                          NAMESPACE, "--target", target,       "--actor",    ACTOR,   "--workflow",
                          "default", "--ttl-ms", TTL,          "--grace-ms", "2000",  "--",
                          "sh",      "-c",       child_script, NULL};
    proc_t p = ctl_start(args, fx.base, worker_token, NULL);
    if (!wait_file(&p, "env", PATIENCE_MS)) {
        char *err = proc_file(&p, "err");
        fail_msg("the command never started under run; stderr:\n%s", err ? err : "");
    }
    return p;
}

/* The session the lease is held in, from the operator view (heap). */
static char *session_of(const char *lease_id)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT session_id FROM lease.active_leases WHERE lease_id = '%s'",
             lease_id);
    char *id = testpg_query_value(fx.db, sql);
    assert_non_null(id);
    assert_true(id[0] != '\0');
    return id;
}

/* `leasectl session list --database-url` (with --tenant when not NULL):
 * its exit status, and its sessions array in *sessions (owned). */
static int session_list(const char *tenant, json_t **answer, json_t **sessions)
{
    const char *args[] = {"session", "list", "--database-url", fx.db, tenant ? "--tenant" : NULL,
                          tenant,    NULL};
    *answer = NULL;
    int rc = ctl(args, fx.base, worker_token, NULL, answer);
    *sessions = *answer ? json_object_get(*answer, "sessions") : NULL;
    return rc;
}

/* The entry of session_id in a session list, or NULL. */
static json_t *listed(json_t *sessions, const char *session_id)
{
    size_t i;
    json_t *s;
    json_array_foreach(sessions, i, s)
    {
        const char *id = json_string_value(json_object_get(s, "session_id"));
        if (id && strcmp(id, session_id) == 0)
            return s;
    }
    return NULL;
}

static void print_stderr(const proc_t *p)
{
    char *err = proc_file(p, "err");
    print_message("run stderr:\n%s", err ? err : "");
    free(err);
}

static void session_closed_from_outside_cancels_the_command(void **state)
{
    (void)state;
    proc_t run = run_start("run-sess-close");
    char *lease_id = env_value(&run, "LEASE_ID");
    char *session_id = session_of(lease_id);

    /* kept alive past two TTLs by the session alone */
    lease_sleep_ms(2 * 1500);
    assert_false(wait_file(&run, "term", 0));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.active_leases WHERE lease_id = '%s'",
             lease_id);
    assert_int_equal(testpg_query_int(fx.db, sql), 1);

    /* an operator lists it: its tenant, its one lease, time left */
    json_t *answer = NULL, *sessions = NULL;
    assert_int_equal(session_list(NULL, &answer, &sessions), 0);
    json_t *entry = listed(sessions, session_id);
    assert_non_null(entry);
    assert_string_equal(json_string_value(json_object_get(entry, "tenant_id")), TENANT);
    assert_int_equal(json_integer_value(json_object_get(entry, "leases")), 1);
    assert_int_equal(json_integer_value(json_object_get(entry, "ttl_ms")), 1500);
    json_int_t remaining = json_integer_value(json_object_get(entry, "remaining_ms"));
    assert_true(remaining > 0 && remaining <= 1500);
    json_decref(answer);
    assert_int_equal(session_list(TENANT, &answer, &sessions), 0);
    assert_non_null(listed(sessions, session_id));
    json_decref(answer);
    assert_int_equal(session_list("tenant-nobody", &answer, &sessions), 0);
    assert_int_equal(json_array_size(sessions), 0);
    json_decref(answer);

    const char *close_args[] = {"session",         "close",    "--request-id",
                                "req_close_run_1", session_id, NULL};
    assert_int_equal(ctl(close_args, fx.base, worker_token, NULL, &answer), 0);
    assert_non_null(answer);
    assert_string_equal(json_string_value(json_object_get(answer, "code")), "lease_released");
    assert_int_equal(json_integer_value(json_object_get(answer, "leases_ended")), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(answer, "session"), "state")), "closed");
    json_decref(answer);
    int64_t closed_at = lease_mono_now_ns();

    bool cancelled = wait_file(&run, "term", PATIENCE_MS);
    if (!cancelled)
        print_stderr(&run);
    assert_true(cancelled);
    print_message("session closed to SIGTERM: %lld ms (information only)\n",
                  (long long)((lease_mono_now_ns() - closed_at) / 1000000));
    assert_int_equal(proc_wait(&run, PATIENCE_MS), 76);
    char *err = proc_file(&run, "err");
    assert_non_null(strstr(err, "lost (lease_lost)"));
    free(err);

    /* a closed session is no longer listed */
    assert_int_equal(session_list(NULL, &answer, &sessions), 0);
    assert_null(listed(sessions, session_id));
    json_decref(answer);

    /* closed already: another close is lease_lost, exit 1 */
    const char *again[] = {"session", "close", "--request-id", "req_close_run_2", session_id, NULL};
    assert_int_equal(ctl(again, fx.base, worker_token, NULL, &answer), 1);
    assert_string_equal(json_string_value(json_object_get(answer, "code")), "lease_lost");
    json_decref(answer);
    free(session_id);
    free(lease_id);
    proc_cleanup(&run);
}

static void frozen_past_its_session_ttl_cancels_the_command(void **state)
{
    (void)state;
    proc_t run = run_start("run-sess-frozen");
    char *lease_id = env_value(&run, "LEASE_ID");
    char *session_id = session_of(lease_id);

    assert_int_equal(kill(run.pid, SIGSTOP), 0);
    /* the session expires at the service: its lease with it */
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.active_sessions WHERE session_id = '%s'",
             session_id);
    assert_true(test_wait_until(PATIENCE_MS, testpg_query_int(fx.db, sql) == 0));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.active_leases WHERE lease_id = '%s'",
             lease_id);
    assert_int_equal(testpg_query_int(fx.db, sql), 0);
    assert_false(wait_file(&run, "term", 0)); /* run is frozen: nobody told the command */
    assert_int_equal(kill(run.pid, SIGCONT), 0);

    bool cancelled = wait_file(&run, "term", PATIENCE_MS);
    if (!cancelled)
        print_stderr(&run);
    assert_true(cancelled);
    assert_int_equal(proc_wait(&run, PATIENCE_MS), 76);
    free(session_id);
    free(lease_id);
    proc_cleanup(&run);
}

static void malformed_session_id_is_refused(void **state)
{
    (void)state;
    long long before = testpg_query_int(fx.db, "SELECT count(*) FROM lease.sessions");
    const char *args[] = {"session", "close", "session/../x", NULL};
    json_t *answer = NULL;
    assert_int_equal(ctl(args, fx.base, worker_token, NULL, &answer), 65);
    assert_string_equal(json_string_value(json_object_get(answer, "code")),
                        "invalid_lease_request");
    json_decref(answer);
    const char *none[] = {"session", "close", NULL};
    assert_int_equal(ctl(none, fx.base, worker_token, NULL, NULL), 2);
    assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.sessions"), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(session_closed_from_outside_cancels_the_command),
        cmocka_unit_test(frozen_past_its_session_ttl_cancels_the_command),
        cmocka_unit_test(malformed_session_id_is_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, http_fx_teardown);
}
