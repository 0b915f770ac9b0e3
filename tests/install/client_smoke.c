/*
 * client_smoke.c - a program a user of the installed client library
 * writes: built by tests/install_check against an installed prefix with
 * nothing but `pkg-config --cflags --libs leaseclient`, then run. No
 * service is needed: it checks what the library decides by itself (URL
 * checks, identity rules, ids) and that a refused connection is the typed
 * lease_backend_unavailable, not a crash or a guess.
 */
#include <stdio.h>
#include <string.h>

#include <lease/client.h>
#include <lease/held.h>
#include <lease/worker.h> /* the deprecated earlier names: still installed, still linked */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "client_smoke: failed: %s (line %d)\n", #cond, __LINE__);              \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    CHECK(lease_client_new("ftp://127.0.0.1:1", NULL) == NULL);

    lease_identity_input_t raw = {"Tenant-Main", "program-a",   "starintel-target",
                                  "target_01",   "usernamegen", "default",
                                  NULL};
    lease_identity_t id;
    const char *bad = NULL;
    CHECK(lease_identity_normalize(&raw, &id, &bad));
    CHECK(strcmp(id.operation_class, "default") == 0);
    raw.target_id = "bad/target";
    CHECK(!lease_identity_normalize(&raw, &id, &bad) && strcmp(bad, "target_id") == 0);

    char rid[LEASE_ID_MAX + 1];
    CHECK(lease_client_new_id("req_", rid, sizeof rid) && strlen(rid) == 4 + 26);

    /* port 1 on loopback: nothing listens, nothing can have been sent */
    lease_client_t *c = lease_client_new("http://127.0.0.1:1", "lsk_key_example");
    CHECK(c != NULL);
    lease_client_acquire_t req = {.identity = {"tenant-main", "program-a", "starintel-target",
                                               "target_01", "usernamegen", "default", NULL},
                                  .service_instance_id = "smoke-1",
                                  .execution_id = "exec_1",
                                  .job_id = "job_1"};
    lease_client_call_t call = {.deadline_ms = 2000};
    lease_result_t res;
    lease_code_t code = lease_client_acquire(c, &req, &call, &res);
    CHECK(code == LEASE_BACKEND_UNAVAILABLE);
    CHECK(strcmp(lease_code_name(code), "lease_backend_unavailable") == 0);
    CHECK(lease_code_retryable(code));
    CHECK(call.transport_error[0] != '\0');
    lease_client_free(c);
    CHECK(strcmp(lease_held_state_name(LEASE_HELD_LOST), "lost") == 0);
    CHECK(strcmp(lease_worker_state_name(LEASE_WORKER_LOST), "lost") == 0);
    puts("client_smoke: ok");
    return 0;
}
