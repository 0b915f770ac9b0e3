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
 * audit_fields(e), the name/value pairs of an entry e of XRANGE, whether
 * packed into its one field 'p' (NUL between names and values, the form
 * the library writes since its version 5: docs/backends.md "Audit events")
 * or one field a pair. */
#define TEST_STORE_AUDIT_FIELDS_LUA                                                                \
    "local function audit_fields(e) "                                                              \
    "  local f = e[2] "                                                                            \
    "  if #f ~= 2 or f[1] ~= 'p' then return f end "                                               \
    "  local out = {} "                                                                            \
    "  for part in (f[2] .. '\\0'):gmatch('([^%z]*)%z') do out[#out + 1] = part end "              \
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
