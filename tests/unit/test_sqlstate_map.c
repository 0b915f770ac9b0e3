/*
 * test_sqlstate_map.c - the SQLSTATE -> action/result table of the Postgres
 * adapter: every row by its own code, class fallback, the default, malformed
 * input, what leasectl's one-shot calls make of each, and that
 * docs/architecture.md mirrors every row.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_sqlstate.h"

typedef struct expect {
    const char *sqlstate;
    const char *name;
    store_pg_action_t action;
    lease_code_t code;
    bool retryable;
    store_pg_admin_action_t admin; /* leasectl's one-shot calls */
} expect_t;

/* What the adapter must do, written out independently of the table. */
static const expect_t expected[] = {
    {"40001", "serialization_failure", STORE_PG_ACT_RETRY, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_RETRY},
    {"40P01", "deadlock_detected", STORE_PG_ACT_RETRY, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_RETRY},
    {"55P03", "lock_not_available", STORE_PG_ACT_RETRY, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_FAILED},
    {"23505", "unique_violation", STORE_PG_ACT_RETRY, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_INVALID},
    {"40003", "statement_completion_unknown", STORE_PG_ACT_FAIL, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_FAILED},
    {"57014", "query_canceled", STORE_PG_ACT_CANCELLED, LEASE_DEADLINE_EXCEEDED, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"57P01", "admin_shutdown", STORE_PG_ACT_CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"57P02", "crash_shutdown", STORE_PG_ACT_CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"57P03", "cannot_connect_now", STORE_PG_ACT_CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"57P05", "idle_session_timeout", STORE_PG_ACT_CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"25006", "read_only_sql_transaction", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_FAILED},
    {"42501", "insufficient_privilege", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_DENIED},
    {"42883", "undefined_function", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_FAILED},
    {"3F000", "invalid_schema_name", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_FAILED},
    {"LS001", "lease_record_corrupt", STORE_PG_ACT_QUARANTINE, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_FAILED},
    {"LS002", "lease_isolation_required", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_FAILED},
    {"LS003", "lease_malformed_call", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_INVALID},
    {"LS005", "lease_token_limit", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_INVALID},
    /* class fallbacks */
    {"08006", "connection_exception", STORE_PG_ACT_CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"08000", "connection_exception", STORE_PG_ACT_CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"40002", "transaction_rollback", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_FAILED},
    {"53300", "insufficient_resources", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"57P04", "operator_intervention", STORE_PG_ACT_CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
     STORE_PG_ADMIN_UNAVAILABLE},
    {"58030", "system_error", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_FAILED},
    {"XX000", "internal_error", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_FAILED},
    {"22P02", "data_exception", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_INVALID},
    {"42P01", "syntax_error_or_access_rule_violation", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE,
     false, STORE_PG_ADMIN_FAILED},
    {"LS004", "lease_project_error", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_FAILED},
    {"LS010", "lease_project_error", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, false,
     STORE_PG_ADMIN_FAILED},
    {"23514", "integrity_constraint_violation", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_INVALID},
    /* default */
    {"23503", "integrity_constraint_violation", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_INVALID},
    {"P0001", "unexpected_error", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_FAILED},
    {"55000", "unexpected_error", STORE_PG_ACT_FAIL, LEASE_BACKEND_UNAVAILABLE, true,
     STORE_PG_ADMIN_FAILED},
};

static void test_expected_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        const expect_t *e = &expected[i];
        const store_pg_sqlstate_rule_t *r = store_pg_sqlstate_lookup(e->sqlstate);
        assert_non_null(r);
        if (strcmp(r->name, e->name) != 0 || r->action != e->action || r->code != e->code ||
            r->retryable != e->retryable || r->admin != e->admin)
            fail_msg("%s: got %s/%s/%s/%d/%s, want %s/%s/%s/%d/%s", e->sqlstate, r->name,
                     store_pg_action_name(r->action), lease_code_name(r->code), r->retryable,
                     store_pg_admin_action_name(r->admin), e->name, store_pg_action_name(e->action),
                     lease_code_name(e->code), e->retryable, store_pg_admin_action_name(e->admin));
    }
}

/* Every row of the table is reachable: exact rows by their code, class
 * rows by a code of that class that no exact row claims. */
static void test_every_table_row_reachable(void **state)
{
    (void)state;
    size_t n;
    const store_pg_sqlstate_rule_t *t = store_pg_sqlstate_table(&n);
    assert_true(n > 3);
    assert_string_equal(t[n - 1].pattern, "");
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(t[i].pattern);
        assert_true(len == 0 || len == 2 || len == 5);
        assert_non_null(t[i].name);
        assert_false(lease_code_is_success(t[i].code));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(t[i].pattern, t[j].pattern);
        if (len == 5) {
            assert_ptr_equal(store_pg_sqlstate_lookup(t[i].pattern), &t[i]);
        } else if (len == 2) {
            char code[6];
            snprintf(code, sizeof code, "%sZZZ", t[i].pattern);
            assert_ptr_equal(store_pg_sqlstate_lookup(code), &t[i]);
        }
    }
    /* exact beats class: 40001 is in class 40 but has its own row */
    assert_int_equal(store_pg_sqlstate_lookup("40001")->action, STORE_PG_ACT_RETRY);
    assert_int_equal(store_pg_sqlstate_lookup("40999")->action, STORE_PG_ACT_FAIL);
}

static void test_default_and_malformed(void **state)
{
    (void)state;
    size_t n;
    const store_pg_sqlstate_rule_t *t = store_pg_sqlstate_table(&n);
    const store_pg_sqlstate_rule_t *def = &t[n - 1];
    const char *odd[] = {NULL, "", "4000", "400011", "ls001", "40 01", "4000\x01", "LS00"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        assert_ptr_equal(store_pg_sqlstate_lookup(odd[i]), def);
    assert_int_equal(def->code, LEASE_BACKEND_UNAVAILABLE);
    assert_int_equal(def->action, STORE_PG_ACT_FAIL);
}

static void test_session_discard(void **state)
{
    (void)state;
    /* sessions that ended, or may hold odd state, are never reused */
    const char *discard[] = {"08006", "57P01", "57P02", "40003", "25006", "XX000"};
    for (size_t i = 0; i < sizeof discard / sizeof discard[0]; i++)
        assert_true(store_pg_sqlstate_lookup(discard[i])->discard_connection);
    const char *keep[] = {"40001", "40P01", "57014", "LS001", "22P02"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        assert_false(store_pg_sqlstate_lookup(keep[i])->discard_connection);
    assert_int_equal(store_pg_sqlstate_lookup("LS001")->severity, STORE_PG_LOG_ALERT);
}

/* docs/architecture.md carries the same table: each row's pattern, name,
 * action and code appear together on one line. */
static void test_docs_mirror_table(void **state)
{
    (void)state;
    FILE *f = fopen(LEASE_TEST_SOURCE_DIR "/docs/architecture.md", "r");
    assert_non_null(f);
    char *doc = NULL;
    size_t cap = 0, len = 0;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        if (len + got + 1 > cap) {
            cap = (len + got + 1) * 2;
            doc = realloc(doc, cap);
            assert_non_null(doc);
        }
        memcpy(doc + len, buf, got);
        len += got;
    }
    fclose(f);
    assert_non_null(doc);
    doc[len] = '\0';
    size_t n;
    const store_pg_sqlstate_rule_t *t = store_pg_sqlstate_table(&n);
    for (size_t i = 0; i < n; i++) {
        char pat[16];
        snprintf(pat, sizeof pat, "| `%s` |", t[i].pattern[0] ? t[i].pattern : "*");
        char *line = strstr(doc, pat);
        if (!line)
            fail_msg("docs/architecture.md has no row starting %s", pat);
        char *end = strchr(line, '\n');
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        char row[512];
        snprintf(row, sizeof row, "%.*s", (int)ll, line);
        char admin[32];
        snprintf(admin, sizeof admin, "| %s |", store_pg_admin_action_name(t[i].admin));
        if (!strstr(row, t[i].name) || !strstr(row, store_pg_action_name(t[i].action)) ||
            !strstr(row, lease_code_name(t[i].code)) || !strstr(row, admin))
            fail_msg("docs row differs from the code for %s: %s", pat, row);
    }
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expected_rows),
        cmocka_unit_test(test_every_table_row_reachable),
        cmocka_unit_test(test_default_and_malformed),
        cmocka_unit_test(test_session_discard),
        cmocka_unit_test(test_docs_mirror_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
