/*
 * test_ctl_options.c - leasectl's shared identity and lease options
 * (src/ctl/ctl_options.c): flags, LEASE_* environment defaults and their
 * precedence, generated ids, deadlines, and usage errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl/ctl.h"
#include "ctl/ctl_options.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

static int clear_env(void **state)
{
    (void)state;
    /* the names run exports are the ones these tests set */
    for (const char *const *name = ctl_run_exported_names; *name; name++)
        unsetenv(*name);
    return 0;
}

static void set_run_env(void)
{
    setenv("LEASE_TENANT_ID", "tenant-env", 1);
    setenv("LEASE_PROGRAM_ID", "program-env", 1);
    setenv("LEASE_TARGET_NAMESPACE", "ns-env", 1);
    setenv("LEASE_TARGET_ID", "target-env", 1);
    setenv("LEASE_ACTOR_NAME", "actor-env", 1);
    setenv("LEASE_WORKFLOW_NAME", "workflow-env", 1);
    setenv("LEASE_OPERATION_CLASS", "collect", 1);
    setenv("LEASE_ID", "lease_fromenv", 1);
    setenv("LEASE_FENCING_TOKEN", "42", 1);
    setenv("LEASE_EXECUTION_ID", "exec_fromenv", 1);
    setenv("LEASE_TRACE_ID", "trace_fromenv", 1);
    setenv("LEASE_SERVICE_INSTANCE_ID", "instance_fromenv", 1);
    setenv("LEASE_URL", "http://127.0.0.1:9999", 1);
    setenv("LEASE_TOKEN", "lsk_key_example_secret", 1);
}

static void every_flag_is_taken(void **state)
{
    (void)state;
    char *argv[] = {"acquire",
                    "--tenant",
                    "tenant-main",
                    "--program",
                    "program-a",
                    "--namespace",
                    "starintel-target",
                    "--target",
                    "target_01",
                    "--actor",
                    "usernamegen",
                    "--workflow",
                    "default",
                    "--operation-class",
                    "enrich",
                    "--ttl-ms",
                    "30000",
                    "--maximum-lifetime-ms",
                    "600000",
                    "--wait-ms",
                    "2500",
                    "--service-instance",
                    "instance-7",
                    "--execution-id",
                    "exec_1",
                    "--job-id",
                    "job_1",
                    "--trace-id",
                    "trace_1",
                    "--request-id",
                    "req_1",
                    "--deadline-ms",
                    "7000",
                    "--url",
                    "http://10.0.0.1:8080",
                    NULL};
    ctl_options_t o;
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_IDENTITY, ARGC(argv), argv, NULL), ARGC(argv));
    assert_string_equal(o.identity.tenant_id, "tenant-main");
    assert_string_equal(o.identity.program_id, "program-a");
    assert_string_equal(o.identity.target_namespace, "starintel-target");
    assert_string_equal(o.identity.target_id, "target_01");
    assert_string_equal(o.identity.actor_name, "usernamegen");
    assert_string_equal(o.identity.workflow_name, "default");
    assert_string_equal(o.identity.operation_class, "enrich");
    assert_int_equal(o.ttl_ms, 30000);
    assert_int_equal(o.maximum_lifetime_ms, 600000);
    assert_int_equal(o.wait_ms, 2500);
    assert_int_equal(o.deadline_ms, 7000);
    assert_string_equal(o.service_instance_id, "instance-7");
    assert_string_equal(o.execution_id, "exec_1");
    assert_string_equal(o.job_id, "job_1");
    assert_string_equal(o.trace_id, "trace_1");
    assert_string_equal(o.request_id, "req_1");
    assert_string_equal(o.url, "http://10.0.0.1:8080");
    assert_null(o.token);
    assert_null(o.lease_id); /* not a held-lease command */
    ctl_options_free(&o);
}

static bool all_lower_base32(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '2' && s[i] <= '7')))
            return false;
    return s[n] == '\0';
}

static void omitted_ids_are_generated(void **state)
{
    (void)state;
    char *argv[] = {"acquire", "--tenant", "t", "--program",  "p", "--namespace", "n", "--target",
                    "x",       "--actor",  "a", "--workflow", "w", NULL};
    ctl_options_t o, again;
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_IDENTITY, ARGC(argv), argv, NULL), ARGC(argv));
    assert_int_equal(strncmp(o.execution_id, "exec_", 5), 0);
    assert_true(all_lower_base32(o.execution_id + 5, 26));
    assert_int_equal(strncmp(o.job_id, "job_", 4), 0);
    assert_true(all_lower_base32(o.job_id + 4, 26));
    assert_int_equal(strlen(o.trace_id), 32);
    assert_int_equal(strspn(o.trace_id, "0123456789abcdef"), 32);
    assert_null(o.request_id); /* generated per call by the client */
    assert_null(o.identity.operation_class);
    assert_string_equal(o.url, "http://127.0.0.1:8080");

    /* service instance: host name, '-', pid */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char expect_suffix[32];
    snprintf(expect_suffix, sizeof expect_suffix, "-%ld", (long)getpid());
    size_t n = strlen(o.service_instance_id), sl = strlen(expect_suffix);
    assert_true(n > sl);
    assert_string_equal(o.service_instance_id + n - sl, expect_suffix);
    assert_int_equal(strncmp(o.service_instance_id, host, n - sl), 0);

    /* fresh ids each time */
    assert_int_equal(ctl_options_parse(&again, CTL_OPT_IDENTITY, ARGC(argv), argv, NULL),
                     ARGC(argv));
    assert_string_not_equal(o.execution_id, again.execution_id);
    assert_string_not_equal(o.job_id, again.job_id);
    assert_string_not_equal(o.trace_id, again.trace_id);
    ctl_options_free(&o);
    ctl_options_free(&again);
}

static void service_instance_is_sanitised_and_bounded(void **state)
{
    (void)state;
    char small[16];
    ctl_default_service_instance(small, sizeof small);
    char pid[32];
    snprintf(pid, sizeof pid, "-%ld", (long)getpid());
    assert_true(strlen(small) <= 15);
    /* the pid survives truncation: it tells instances on one host apart */
    assert_string_equal(small + strlen(small) - strlen(pid), pid);
    for (const char *p = small; *p; p++)
        assert_non_null(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789._:-",
                               *p));
}

static void environment_of_run_supplies_defaults(void **state)
{
    (void)state;
    set_run_env();
    char *argv[] = {"commit", NULL};
    ctl_options_t o;
    /* commit inside `leasectl run`: no identity flags at all */
    assert_int_equal(
        ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_HELD | CTL_OPT_OPERANDS, 1, argv, NULL),
        1);
    assert_string_equal(o.identity.tenant_id, "tenant-env");
    assert_string_equal(o.identity.program_id, "program-env");
    assert_string_equal(o.identity.target_namespace, "ns-env");
    assert_string_equal(o.identity.target_id, "target-env");
    assert_string_equal(o.identity.actor_name, "actor-env");
    assert_string_equal(o.identity.workflow_name, "workflow-env");
    assert_string_equal(o.identity.operation_class, "collect");
    assert_string_equal(o.lease_id, "lease_fromenv");
    assert_int_equal(o.fencing_token, 42);
    assert_string_equal(o.execution_id, "exec_fromenv");
    assert_string_equal(o.trace_id, "trace_fromenv");
    assert_string_equal(o.service_instance_id, "instance_fromenv");
    assert_string_equal(o.url, "http://127.0.0.1:9999");
    assert_non_null(o.token);
    assert_string_equal(o.token, "lsk_key_example_secret");
    ctl_options_free(&o);
    assert_null(o.token);
}

static void flags_win_over_the_environment(void **state)
{
    (void)state;
    set_run_env();
    char *argv[] = {"renew",       "--tenant",           "tenant-flag", "--target",
                    "target-flag", "--lease-id",         "lease_flag",  "--fencing-token",
                    "7",           "--execution-id",     "exec_flag",   "--url",
                    "http://h:1",  "--service-instance", "inst-flag",   NULL};
    ctl_options_t o;
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_HELD, ARGC(argv), argv, NULL),
                     ARGC(argv));
    assert_string_equal(o.identity.tenant_id, "tenant-flag");
    assert_string_equal(o.identity.target_id, "target-flag");
    assert_string_equal(o.identity.program_id, "program-env"); /* not given: env */
    assert_string_equal(o.lease_id, "lease_flag");
    assert_int_equal(o.fencing_token, 7);
    assert_string_equal(o.execution_id, "exec_flag");
    assert_string_equal(o.service_instance_id, "inst-flag");
    assert_string_equal(o.url, "http://h:1");
    /* no --token: LEASE_TOKEN */
    assert_string_equal(o.token, "lsk_key_example_secret");
    ctl_options_free(&o);

    /* --token (docs/config.md: the kebab-case flag of LEASE_TOKEN) wins; the
     * last one given counts */
    char *tok[] = {"acquire", "--token", "lsk_key_first_x", "--token=lsk_key_flag_secret", NULL};
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_IDENTITY, ARGC(tok), tok, NULL), ARGC(tok));
    assert_string_equal(o.token, "lsk_key_flag_secret");
    ctl_options_free(&o);
    assert_null(o.token);
    char *empty[] = {"acquire", "--token", "", NULL};
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_IDENTITY, ARGC(empty), empty, NULL),
                     CTL_PARSE_USAGE);
    assert_null(o.token);
}

static void acquire_does_not_inherit_the_held_lease(void **state)
{
    (void)state;
    set_run_env();
    char *argv[] = {"acquire", NULL};
    ctl_options_t o;
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_IDENTITY, 1, argv, NULL), 1);
    /* identity and trace follow the environment; a new acquisition gets a
     * new execution and the process's own service instance */
    assert_string_equal(o.identity.tenant_id, "tenant-env");
    assert_string_equal(o.trace_id, "trace_fromenv");
    assert_null(o.lease_id);
    assert_int_equal(o.fencing_token, 0);
    assert_string_not_equal(o.execution_id, "exec_fromenv");
    assert_string_not_equal(o.service_instance_id, "instance_fromenv");
    ctl_options_free(&o);
}

static void run_operands_follow_the_double_dash(void **state)
{
    (void)state;
    char *argv[] = {"run",   "--tenant", "t",  "--program",  "p", "--namespace", "n",   "--target",
                    "x",     "--actor",  "a",  "--workflow", "w", "--wait-ms",   "100", "--",
                    "sleep", "--ttl-ms", "60", NULL};
    ctl_options_t o;
    int first = ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_OPERANDS, ARGC(argv), argv, NULL);
    assert_int_equal(first, 16);
    assert_string_equal(argv[first], "sleep");
    assert_int_equal(o.ttl_ms, 0); /* the command's own flags are not ours */
    assert_int_equal(o.wait_ms, 100);
    ctl_options_free(&o);
}

/* run's own option table, the one ctl_run.c parses with */
static void command_options_reach_their_handler(void **state)
{
    (void)state;
    int64_t grace = -1;
    ctl_extra_t extra = ctl_run_extra(&grace);
    char *argv[] = {"run", "--grace-ms",  "1500", "--tenant", "t",    "--program",
                    "p",   "--namespace", "n",    "--target", "x",    "--actor",
                    "a",   "--workflow",  "w",    "--",       "true", NULL};
    ctl_options_t o;
    assert_int_equal(
        ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_OPERANDS, ARGC(argv), argv, &extra), 16);
    assert_int_equal(grace, 1500);
    ctl_options_free(&o);

    char *bad[] = {"run", "--grace-ms", "soon", NULL};
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_OPERANDS, ARGC(bad), bad, &extra),
                     CTL_PARSE_USAGE);
    char *over[] = {"run", "--grace-ms", "3600001", NULL};
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_OPERANDS, ARGC(over), over, &extra),
                     CTL_PARSE_USAGE);
}

static void usage_errors_are_reported(void **state)
{
    (void)state;
    ctl_options_t o;
    const unsigned id = CTL_OPT_IDENTITY;
    char *unknown[] = {"acquire", "--tenantt", "t", NULL};
    assert_int_equal(ctl_options_parse(&o, id, ARGC(unknown), unknown, NULL), CTL_PARSE_USAGE);
    char *missing_value[] = {"acquire", "--tenant", NULL};
    assert_int_equal(ctl_options_parse(&o, id, ARGC(missing_value), missing_value, NULL),
                     CTL_PARSE_USAGE);
    char *missing_identity[] = {"acquire", "--tenant", "t", "--program", "p", NULL};
    assert_int_equal(ctl_options_parse(&o, id, ARGC(missing_identity), missing_identity, NULL),
                     CTL_PARSE_USAGE);
    char *bad_ttl[] = {"acquire", "--ttl-ms", "30s", NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(bad_ttl), bad_ttl, NULL), CTL_PARSE_USAGE);
    char *negative[] = {"acquire", "--wait-ms", "-5", NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(negative), negative, NULL), CTL_PARSE_USAGE);
    char *zero_ttl[] = {"acquire", "--ttl-ms", "0", NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(zero_ttl), zero_ttl, NULL), CTL_PARSE_USAGE);
    char *huge[] = {"acquire", "--deadline-ms", "99999999999999999999", NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(huge), huge, NULL), CTL_PARSE_USAGE);
    char *operand[] = {"acquire", "stray", NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(operand), operand, NULL), CTL_PARSE_USAGE);
    char long_id[200];
    memset(long_id, 'x', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    char *too_long[] = {"acquire", "--execution-id", long_id, NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(too_long), too_long, NULL), CTL_PARSE_USAGE);
    char *empty_request[] = {"acquire", "--request-id", "", NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(empty_request), empty_request, NULL),
                     CTL_PARSE_USAGE);
    /* lease options are not accepted where no lease is held */
    char *held_flag[] = {"acquire", "--lease-id", "lease_1", NULL};
    assert_int_equal(ctl_options_parse(&o, 0, ARGC(held_flag), held_flag, NULL), CTL_PARSE_USAGE);
    /* a held-lease command without its lease */
    char *no_lease[] = {"renew", "--tenant", "t", "--program",  "p", "--namespace", "n", "--target",
                        "x",     "--actor",  "a", "--workflow", "w", NULL};
    assert_int_equal(ctl_options_parse(&o, id | CTL_OPT_HELD, ARGC(no_lease), no_lease, NULL),
                     CTL_PARSE_USAGE);
    char *bad_token[] = {"renew", "--fencing-token", "0", NULL};
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_HELD, ARGC(bad_token), bad_token, NULL),
                     CTL_PARSE_USAGE);
    setenv("LEASE_ID", "lease_1", 1);
    setenv("LEASE_FENCING_TOKEN", "forty-two", 1);
    char *env_token[] = {"renew", NULL};
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_HELD, 1, env_token, NULL), CTL_PARSE_USAGE);
}

static void help_is_not_an_error(void **state)
{
    (void)state;
    ctl_options_t o;
    char *argv[] = {"acquire", "--help", NULL};
    assert_int_equal(ctl_options_parse(&o, CTL_OPT_IDENTITY, ARGC(argv), argv, NULL),
                     CTL_PARSE_HELP);
}

static void deadlines_cover_the_wait_and_are_capped(void **state)
{
    (void)state;
    ctl_options_t o;
    memset(&o, 0, sizeof o);
    assert_int_equal(ctl_options_deadline_ms(&o, false), 5000);
    o.wait_ms = 3000;
    assert_int_equal(ctl_options_deadline_ms(&o, true), 8000);
    assert_int_equal(ctl_options_deadline_ms(&o, false), 5000);
    o.wait_ms = 29000;
    assert_int_equal(ctl_options_deadline_ms(&o, true), 30000);
    o.deadline_ms = 1200;
    assert_int_equal(ctl_options_deadline_ms(&o, true), 1200);
    o.deadline_ms = 90000;
    assert_int_equal(ctl_options_deadline_ms(&o, false), 30000);
}

static void integers_are_parsed_strictly(void **state)
{
    (void)state;
    int64_t v = -1;
    assert_true(ctl_parse_int("0", 0, 10, &v));
    assert_int_equal(v, 0);
    assert_true(ctl_parse_int("9223372036854775807", 1, INT64_MAX, &v));
    assert_int_equal(v, INT64_MAX);
    assert_false(ctl_parse_int("9223372036854775808", 1, INT64_MAX, &v));
    assert_false(ctl_parse_int("", 0, 10, &v));
    assert_false(ctl_parse_int(" 5", 0, 10, &v));
    assert_false(ctl_parse_int("5 ", 0, 10, &v));
    assert_false(ctl_parse_int("+5", 0, 10, &v));
    assert_false(ctl_parse_int("0x10", 0, 100, &v));
    assert_false(ctl_parse_int("11", 0, 10, &v));
    assert_false(ctl_parse_int("4", 5, 10, &v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(every_flag_is_taken, clear_env),
        cmocka_unit_test_setup(omitted_ids_are_generated, clear_env),
        cmocka_unit_test_setup(service_instance_is_sanitised_and_bounded, clear_env),
        cmocka_unit_test_setup(environment_of_run_supplies_defaults, clear_env),
        cmocka_unit_test_setup(flags_win_over_the_environment, clear_env),
        cmocka_unit_test_setup(acquire_does_not_inherit_the_held_lease, clear_env),
        cmocka_unit_test_setup(run_operands_follow_the_double_dash, clear_env),
        cmocka_unit_test_setup(command_options_reach_their_handler, clear_env),
        cmocka_unit_test_setup(usage_errors_are_reported, clear_env),
        cmocka_unit_test_setup(help_is_not_an_error, clear_env),
        cmocka_unit_test_setup(deadlines_cover_the_wait_and_are_capped, clear_env),
        cmocka_unit_test_setup(integers_are_parsed_strictly, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
