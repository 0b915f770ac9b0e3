/*
 * http_ctl_output.c - leasectl for people, against a real leased, on either
 * backend (LEASE_TEST_STORE; registered twice, tests/CMakeLists.txt):
 *
 * - `list` and `inspect` print JSON when stdout is not a terminal (a file
 *   here: what scripts see) and a table when it is one (a pseudo-terminal,
 *   forkpty); `--output json|table` overrides either way; a bad value is a
 *   usage error;
 * - `watch LEASE_ID` waits while the lease is active and prints its final
 *   state once it ends (a release made by the test while it waits), exit
 *   0; `--timeout-ms` on a lease that stays active prints it as it is and
 *   exits 75 after about that long; an ended lease answers at once; an
 *   unknown lease exits 1; no lease id exits 2.
 */
#include <pty.h>

#include "exec_common.h"

static http_fx_t fx;
static const char *worker;

#define IDF                                                                                        \
    "--tenant", TENANT, "--program", PROGRAM, "--namespace", NAMESPACE, "--actor", ACTOR,          \
        "--workflow", "default"

static int setup(void **state)
{
    (void)state;
    http_fx_open(&fx, NULL, "http_ctl_output");
    worker = http_fx_worker(&fx, "prn_ctl_output");
    http_fx_serve(&fx, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    http_fx_close(&fx);
    return 0;
}

typedef struct ran {
    int status;
    char *out; /* stdout (the terminal's output for run_tty, \r removed) */
    char *err; /* stderr (NULL for run_tty: it shares the terminal) */
} ran_t;

/* leasectl args with stdout and stderr to files. */
static ran_t run_file(const char *const *args)
{
    proc_t p = ctl_start(args, fx.base, worker, NULL);
    ran_t r = {.status = proc_wait(&p, 30000)};
    r.out = proc_file(&p, "out");
    r.err = proc_file(&p, "err");
    proc_cleanup(&p);
    return r;
}

/* leasectl args on a pseudo-terminal: isatty(stdout) is true. */
static ran_t run_tty(const char *const *args)
{
    char *argv[32] = {(char *)LEASE_TEST_LEASECTL};
    for (size_t i = 0; args[i] && i < 30; i++)
        argv[i + 1] = (char *)(uintptr_t)args[i];
    char url_var[256], token_var[256];
    snprintf(url_var, sizeof url_var, "LEASE_URL=%s", fx.base);
    snprintf(token_var, sizeof token_var, "LEASE_TOKEN=%s", worker);
    char *envp[] = {url_var, token_var, "NO_PROXY=*", "PATH=/usr/bin:/bin", NULL};
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        execve(argv[0], argv, envp);
        _exit(127);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    char chunk[4096];
    ssize_t n;
    /* read until the child closed the terminal (EIO on Linux) */
    while ((n = read(master, chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
        for (ssize_t i = 0; i < n; i++)
            if (chunk[i] != '\r')
                fputc(chunk[i], mem);
    fclose(mem);
    close(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return (ran_t){.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                   .out = buf};
}

static void ran_free(ran_t *r)
{
    free(r->out);
    free(r->err);
}

static json_t *as_json(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    if (!j)
        fail_msg("not one JSON document:\n%s", text ? text : "(nothing)");
    return j;
}

/* Lines of text that contain every one of the NULL-terminated needles. */
static int lines_with(const char *text, const char *const *needles)
{
    int count = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *copy = strndup(line, len);
        bool all = true;
        for (size_t i = 0; needles[i]; i++)
            all = all && strstr(copy, needles[i]);
        count += all;
        free(copy);
        line = end ? end + 1 : NULL;
    }
    return count;
}

static json_t *acquire(const char *target)
{
    static int n;
    char rid[64];
    snprintf(rid, sizeof rid, "acq-out-%d", ++n);
    return acquire_lease(fx.base, worker, rid, target);
}

static void release(const char *target, json_t *lease)
{
    static int n;
    char rid[64];
    snprintf(rid, sizeof rid, "rel-out-%d", ++n);
    http_resp_t *r =
        call_owned(fx.base, "POST", "/v1/leases/release", worker, owner_body(rid, target, lease));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
}

static const char *id_of(const json_t *lease)
{
    return json_string_value(json_object_get(lease, "lease_id"));
}

static void list_is_json_for_scripts_and_a_table_for_people(void **state)
{
    (void)state;
    json_t *a = acquire("out-a"), *b = acquire("out-b");
    const char *list[] = {"list", "--tenant", TENANT, "--program", PROGRAM, NULL};

    /* not a terminal: one JSON line, as before */
    ran_t r = run_file(list);
    assert_int_equal(r.status, 0);
    json_t *j = as_json(r.out);
    assert_string_equal(json_string_value(json_object_get(j, "code")), "lease_listed");
    assert_int_equal(json_array_size(json_object_get(j, "leases")), 2);
    json_decref(j);
    ran_free(&r);

    /* a terminal: a header and one row per lease with its token and target */
    r = run_tty(list);
    assert_int_equal(r.status, 0);
    print_message("leasectl list on a terminal:\n%s", r.out);
    assert_null(strchr(r.out, '{'));
    assert_int_equal(lines_with(r.out, (const char *[]){"LEASE ID", "TOKEN", "STATE", "TARGET",
                                                        "HOLDER", "EXPIRES", NULL}),
                     1);
    assert_int_equal(lines_with(r.out, (const char *[]){id_of(a), "active", "/out-a", "in ", NULL}),
                     1);
    assert_int_equal(lines_with(r.out, (const char *[]){id_of(b), "active", "/out-b", NULL}), 1);
    ran_free(&r);

    /* --output wins both ways */
    r = run_tty((const char *[]){"list", "--tenant", TENANT, "--program", PROGRAM, "--output",
                                 "json", NULL});
    assert_int_equal(r.status, 0);
    j = as_json(r.out);
    assert_int_equal(json_array_size(json_object_get(j, "leases")), 2);
    json_decref(j);
    ran_free(&r);
    r = run_file((const char *[]){"list", "--tenant", TENANT, "--program", PROGRAM, "--output",
                                  "table", "--page-size", "1", NULL});
    assert_int_equal(r.status, 0);
    assert_int_equal(lines_with(r.out, (const char *[]){"LEASE ID", NULL}), 1);
    assert_int_equal(lines_with(r.out, (const char *[]){"lease_", "active", NULL}), 1);
    assert_int_equal(lines_with(r.out, (const char *[]){"more: --page-token ", NULL}), 1);
    ran_free(&r);
    r = run_file((const char *[]){"list", "--tenant", TENANT, "--program", PROGRAM, "--output",
                                  "yaml", NULL});
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--output json|table"));
    ran_free(&r);

    /* inspect: one line per field */
    r = run_tty((const char *[]){"inspect", "--lease-id", id_of(a), NULL});
    assert_int_equal(r.status, 0);
    print_message("leasectl inspect on a terminal:\n%s", r.out);
    assert_true(r.out[0] != '{'); /* not JSON (metadata {} is a value in it) */
    assert_int_equal(lines_with(r.out, (const char *[]){"lease_id", id_of(a), NULL}), 1);
    assert_int_equal(lines_with(r.out, (const char *[]){"state", "active", NULL}), 1);
    assert_int_equal(lines_with(r.out, (const char *[]){"target_id", "out-a", NULL}), 1);
    assert_int_equal(lines_with(r.out, (const char *[]){"expires_at", "(in ", NULL}), 1);
    ran_free(&r);
    r = run_file((const char *[]){"inspect", "--lease-id", id_of(a), NULL});
    assert_int_equal(r.status, 0);
    j = as_json(r.out);
    assert_string_equal(json_string_value(json_object_get(j, "code")), "lease_inspected");
    json_decref(j);
    ran_free(&r);

    /* a failure on a terminal: no table, the human line */
    r = run_tty(
        (const char *[]){"inspect", "--lease-id", "lease_00000000000000000000000000000000", NULL});
    if (strchr(r.out, '{'))
        fail_msg("JSON on the terminal of a failed inspect:\n%s", r.out);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.out, "lease_not_found"));
    ran_free(&r);

    release("out-a", a);
    release("out-b", b);
    json_decref(a);
    json_decref(b);
}

static void watch_waits_for_the_end(void **state)
{
    (void)state;
    json_t *lease = acquire("out-w");
    int64_t t0 = lease_mono_now_ns() / 1000000;
    proc_t p = ctl_start((const char *[]){"watch", id_of(lease), NULL}, fx.base, worker, NULL);
    lease_sleep_ms(700);
    int st;
    assert_int_equal(waitpid(p.pid, &st, WNOHANG), 0); /* still waiting */
    release("out-w", lease);
    int status = proc_wait(&p, 20000);
    int64_t took = lease_mono_now_ns() / 1000000 - t0;
    char *out = proc_file(&p, "out");
    proc_cleanup(&p);
    print_message("watch answered %lld ms after it started (release at ~700 ms)\n",
                  (long long)took);
    assert_int_equal(status, 0);
    assert_true(took >= 700);
    json_t *j = as_json(out);
    const json_t *l = json_object_get(j, "lease");
    assert_string_equal(json_string_value(json_object_get(l, "lease_id")), id_of(lease));
    assert_string_equal(json_string_value(json_object_get(l, "state")), "released");
    json_decref(j);
    free(out);

    /* an ended lease: at once, as a table on a terminal */
    ran_t r = run_tty((const char *[]){"watch", id_of(lease), NULL});
    assert_int_equal(r.status, 0);
    assert_int_equal(lines_with(r.out, (const char *[]){"state", "released", NULL}), 1);
    ran_free(&r);
    json_decref(lease);
}

static void watch_timeout_and_errors(void **state)
{
    (void)state;
    json_t *lease = acquire("out-t");
    int64_t t0 = lease_mono_now_ns() / 1000000;
    ran_t r = run_file((const char *[]){"watch", "--timeout-ms", "800", id_of(lease), NULL});
    int64_t took = lease_mono_now_ns() / 1000000 - t0;
    assert_int_equal(r.status, 75);
    assert_true(took >= 800 && took < 10000);
    json_t *j = as_json(r.out);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "lease"), "state")),
                        "active");
    json_decref(j);
    assert_non_null(strstr(r.err, "still active"));
    ran_free(&r);

    /* the lease id from LEASE_ID, options before it or after it */
    char id_var[128];
    snprintf(id_var, sizeof id_var, "LEASE_ID=%s", id_of(lease));
    proc_t p = ctl_start((const char *[]){"watch", "--timeout-ms", "300", NULL}, fx.base, worker,
                         (const char *[]){id_var, NULL});
    assert_int_equal(proc_wait(&p, 20000), 75);
    proc_cleanup(&p);

    r = run_file((const char *[]){"watch", "lease_00000000000000000000000000000000", NULL});
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "lease_not_found"));
    ran_free(&r);
    r = run_file((const char *[]){"watch", NULL});
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "LEASE_ID"));
    ran_free(&r);
    r = run_file((const char *[]){"watch", "a", "b", NULL});
    assert_int_equal(r.status, 2);
    ran_free(&r);
    release("out-t", lease);
    json_decref(lease);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(list_is_json_for_scripts_and_a_table_for_people),
        cmocka_unit_test(watch_waits_for_the_end),
        cmocka_unit_test(watch_timeout_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
