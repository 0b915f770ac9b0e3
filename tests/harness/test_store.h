/*
 * test_store.h - which backend a contract test runs against, chosen by one
 * setting: LEASE_TEST_STORE=valkey runs it against a throwaway redis-server
 * (tests/harness/valkeyserver) with leased on LEASE_STORE_URL; unset (or
 * "postgres") against the shared Postgres fixture. Anything else stops the
 * test: a typo must not quietly run the other backend.
 * (tests/CMakeLists.txt registers NAME_valkey entries with the setting.)
 */
#ifndef LEASE_TEST_STORE_H
#define LEASE_TEST_STORE_H

#include <stdbool.h>

/* Whether LEASE_TEST_STORE asks for Valkey (exits 2 on an unknown value). */
bool test_store_is_valkey(void);

/* A started redis-server with the leased_v1 library loaded and the
 * namespace bound by the real `leasectl migrate`. */
typedef struct test_store_valkey {
    char state[256];  /* the valkeyserver script's state file */
    char url[64];     /* redis://127.0.0.1:PORT */
    char setting[96]; /* LEASE_STORE_URL=<url>, for leased's environment */
} test_store_valkey_t;

/* Starts the server and migrates it; exits the test (1) on failure. */
void test_store_valkey_start(test_store_valkey_t *v);
/* Stops the server and removes its directory. */
void test_store_valkey_stop(test_store_valkey_t *v);

/* Lua, the prefix of an EVAL script that reads the audit Stream:
 * audit_fields(e), the name/value pairs of an entry e of XRANGE, whether a
 * mutation's entry packed into its one field 'm' (its values in this
 * order, joined by NUL, '' for a member it does not have: the form the
 * library writes since its version 5, docs/backends.md "Audit events") or
 * one field a pair. The names are written out here too, not read from
 * the library: the tests pin the stored form. */
#define TEST_STORE_AUDIT_FIELDS_LUA                                                                \
    "local AUDIT_M = {'event_type', 'occurred_at_ms', 'code', 'decision', 'backend_health', "      \
    "  'source', 'principal_id', 'client_id', 'credential_id', 'request_id', 'correlation_id', "   \
    "  'trace_id', 'priority', 'tenant_id', 'program_id', 'target_namespace', 'target_id', "       \
    "  'actor_name', 'workflow_name', 'operation_class', 'lease_id', 'fencing_token', "            \
    "  'previous_state', 'resulting_state', 'service_instance_id', 'execution_id', 'job_id', "     \
    "  'requested_ttl_ms', 'effective_ttl_ms', 'reason', 'incident_id'} "                          \
    "local function audit_fields(e) "                                                              \
    "  local f = e[2] "                                                                            \
    "  if #f ~= 2 or f[1] ~= 'm' then return f end "                                               \
    "  local out, k = {}, 0 "                                                                      \
    "  for v in (f[2] .. '\\0'):gmatch('([^%z]*)%z') do "                                          \
    "    k = k + 1 "                                                                               \
    "    if v ~= '' then out[#out + 1] = AUDIT_M[k] or ('?' .. k); out[#out + 1] = v end "         \
    "  end "                                                                                       \
    "  return out "                                                                                \
    "end "

/* Runs redis-cli (LEASE_TEST_REDIS_CLI, default redis-cli, as the
 * valkeyserver script) on v's server with args (NULL-terminated, without
 * program and port; passed as they are, no shell): what it printed (heap),
 * or NULL when it could not run or exited non-zero. For a contract test's
 * look into the store where a Postgres test reads a table. */
char *test_store_valkey_cli(const test_store_valkey_t *v, const char *const *args);

/* redis-cli's integer answer to args on v's server (an EVAL that counts,
 * INFO's figure read by a script, SCARD, ...). Prints what redis-cli printed
 * instead and exits the test (1) when that is no integer. */
long long test_store_valkey_cli_int(const test_store_valkey_t *v, const char *const *args);

#endif
