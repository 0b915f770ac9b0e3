/*
 * valkey_store.c - the Valkey adapter as a lease_store_t (lease_store_ops,
 * store_valkey_ops.c) against a real redis-server: the dispatchers of
 * lease/store.h reach the functions; list answers the active leases of a
 * tenant/program inside the caller's scope, a page at a time, and refuses a
 * token of another listing; credentials are stored as their digest and
 * looked up with revocation and expiry judged at server time; what is not
 * built on Valkey answers a typed refusal; store URLs parse or say why not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "lease/store_valkey.h"
#include "valkey_service.h"

typedef struct fixture {
    vk_server_t server;
    lease_store_t *store;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    char err[256] = "";
    if (!vk_start(&f->server))
        return -1;
    lease_valkey_config_t cfg = {.host = "127.0.0.1", .port = f->server.port, .ns = "t"};
    if (lease_valkey_store_open(&cfg, &f->store, err, sizeof err) != LEASE_INSPECTED) {
        fprintf(stderr, "open: %s\n", err);
        return -1;
    }
    int64_t epoch = -1;
    if (lease_valkey_bind(lease_valkey_of(f->store), 0, &epoch, err, sizeof err) !=
        LEASE_INSPECTED) {
        fprintf(stderr, "bind: %s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    lease_store_close(f->store);
    vk_stop(&f->server);
    free(f);
    return 0;
}

static lease_record_t acquire(fixture_t *f, const char *principal, const char *program,
                              const char *target, const char *actor, int64_t ttl_ms)
{
    static int n;
    char rid[32];
    snprintf(rid, sizeof rid, "acq-%d", ++n);
    lease_acquire_req_t r;
    memset(&r, 0, sizeof r);
    vk_fill_call(&r.call, principal, rid, 'a', 5000);
    snprintf(r.identity.tenant_id, sizeof r.identity.tenant_id, "tenant-main");
    snprintf(r.identity.program_id, sizeof r.identity.program_id, "%s", program);
    snprintf(r.identity.target_namespace, sizeof r.identity.target_namespace, "ns");
    snprintf(r.identity.target_id, sizeof r.identity.target_id, "%s", target);
    snprintf(r.identity.actor_name, sizeof r.identity.actor_name, "%s", actor);
    snprintf(r.identity.workflow_name, sizeof r.identity.workflow_name, "default");
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "inst-1");
    snprintf(r.execution_id, sizeof r.execution_id, "exec-1");
    snprintf(r.job_id, sizeof r.job_id, "job-1");
    r.ttl_ms = ttl_ms;
    lease_result_t res;
    lease_code_t code = lease_store_acquire(f->store, &r, &res);
    if (code != LEASE_ACQUIRED)
        fprintf(stderr, "acquire: %s field %s detail %s\n", lease_code_name(code), res.field,
                res.detail);
    assert_int_equal(code, LEASE_ACQUIRED);
    return res.lease;
}

static lease_list_req_t list_req(lease_list_by_t by, int page_size)
{
    lease_list_req_t q;
    memset(&q, 0, sizeof q);
    vk_fill_call(&q.call, "p1", "", 'l', 5000);
    snprintf(q.scope.tenant_id, sizeof q.scope.tenant_id, "tenant-main");
    snprintf(q.scope.program_id, sizeof q.scope.program_id, "*");
    q.scope.all_actors = true;
    q.by = by;
    snprintf(q.tenant_id, sizeof q.tenant_id, "tenant-main");
    snprintf(q.program_id, sizeof q.program_id, "prog-a");
    q.page_size = page_size;
    return q;
}

static void list_scoped_and_paged(void **state)
{
    fixture_t *f = *state;
    acquire(f, "p1", "prog-a", "t3", "actor-a", 0);
    acquire(f, "p2", "prog-a", "t1", "actor-b", 0);
    acquire(f, "p1", "prog-a", "t2", "actor-a", 0);
    acquire(f, "p1", "prog-b", "t1", "actor-a", 0); /* another program */
    acquire(f, "p1", "prog-a", "t0", "actor-a", 1001);
    lease_sleep_ms(1300); /* t0 expired: not listed */

    /* by program, two per page, in identity order */
    lease_list_req_t q = list_req(LEASE_LIST_BY_PROGRAM, 2);
    lease_list_result_t r;
    assert_int_equal(lease_store_list(f->store, &q, &r), LEASE_LISTED);
    assert_int_equal(r.count, 2);
    assert_string_equal(r.leases[0].identity.target_id, "t1");
    assert_string_equal(r.leases[1].identity.target_id, "t2");
    assert_true(r.leases[0].fencing_token > 0);
    assert_int_equal(r.leases[0].state, LEASE_STATE_ACTIVE);
    assert_true(r.next_page_token[0] != '\0');
    char token[LEASE_PAGE_TOKEN_MAX + 1];
    snprintf(token, sizeof token, "%s", r.next_page_token);
    lease_list_result_free(&r);
    snprintf(q.page_token, sizeof q.page_token, "%s", token);
    assert_int_equal(lease_store_list(f->store, &q, &r), LEASE_LISTED);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.leases[0].identity.target_id, "t3");
    assert_string_equal(r.next_page_token, "");
    lease_list_result_free(&r);

    /* a page token of another listing, or forged, is invalid */
    lease_list_req_t o = list_req(LEASE_LIST_BY_OWNER, 2);
    snprintf(o.owner_principal_id, sizeof o.owner_principal_id, "p1");
    snprintf(o.page_token, sizeof o.page_token, "%s", token);
    assert_int_equal(lease_store_list(f->store, &o, &r), LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(r.field, "page_token");
    snprintf(q.page_token, sizeof q.page_token, "not-a-token");
    assert_int_equal(lease_store_list(f->store, &q, &r), LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(r.field, "page_token");

    /* by owner: p1's leases only */
    o.page_token[0] = '\0';
    o.page_size = 0; /* the default page */
    assert_int_equal(lease_store_list(f->store, &o, &r), LEASE_LISTED);
    assert_int_equal(r.count, 2);
    assert_string_equal(r.leases[0].identity.target_id, "t2");
    assert_string_equal(r.leases[1].identity.target_id, "t3");
    lease_list_result_free(&r);

    /* by target */
    lease_list_req_t t = list_req(LEASE_LIST_BY_TARGET, 10);
    snprintf(t.target_namespace, sizeof t.target_namespace, "ns");
    snprintf(t.target_id, sizeof t.target_id, "t1");
    assert_int_equal(lease_store_list(f->store, &t, &r), LEASE_LISTED);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.leases[0].owner_principal_id, "p2");
    lease_list_result_free(&r);

    /* the scope: actor-b only */
    q = list_req(LEASE_LIST_BY_PROGRAM, 10);
    q.scope.all_actors = false;
    q.scope.n_actors = 1;
    snprintf(q.scope.actor_names[0], sizeof q.scope.actor_names[0], "actor-b");
    assert_int_equal(lease_store_list(f->store, &q, &r), LEASE_LISTED);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.leases[0].identity.actor_name, "actor-b");
    lease_list_result_free(&r);
    /* another tenant's scope sees nothing */
    snprintf(q.scope.tenant_id, sizeof q.scope.tenant_id, "tenant-other");
    assert_int_equal(lease_store_list(f->store, &q, &r), LEASE_LISTED);
    assert_int_equal(r.count, 0);
    lease_list_result_free(&r);

    q = list_req(LEASE_LIST_BY_PROGRAM, 501);
    assert_int_equal(lease_store_list(f->store, &q, &r), LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(r.field, "page_size");
}

static void credentials_digest_only(void **state)
{
    fixture_t *f = *state;
    lease_valkey_t *v = lease_valkey_of(f->store);
    char err[256] = "";
    char *row = NULL;
    const char *digest = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    char req[1024];
    snprintf(req, sizeof req,
             "{\"credential_id\":\"key_abcdefghijklmnopqrstuvwxyz\",\"principal_id\":\"svc-1\","
             "\"client_id\":\"client-1\",\"tenant_id\":\"Tenant-Main\",\"program_id\":\"prog-a\","
             "\"actor_names\":[\"actor-a\",\"actor-b\"],"
             "\"capabilities\":[\"targets:read\",\"targets:lease\"],\"secret_digest\":\"%s\"}",
             digest);
    assert_int_equal(lease_valkey_credential_create(v, req, &row, err, sizeof err),
                     LEASE_INSPECTED);
    assert_non_null(strstr(row, "\"tenant_id\":\"tenant-main\""));
    assert_null(strstr(row, "secret_digest"));
    free(row);
    /* the same id again, and a worker asking for revoke, are refused */
    assert_int_equal(lease_valkey_credential_create(v, req, &row, err, sizeof err),
                     LEASE_INVALID_LEASE_REQUEST);
    assert_non_null(strstr(err, "exists"));
    char bad[1024];
    snprintf(bad, sizeof bad,
             "{\"credential_id\":\"key_bbcdefghijklmnopqrstuvwxyz\",\"principal_id\":\"svc-1\","
             "\"client_id\":\"c\",\"tenant_id\":\"t\",\"program_id\":\"p\",\"actor_names\":[\"*\"],"
             "\"capabilities\":[\"targets:revoke\"],\"secret_digest\":\"%s\"}",
             digest);
    assert_int_equal(lease_valkey_credential_create(v, bad, &row, err, sizeof err),
                     LEASE_INVALID_LEASE_REQUEST);
    assert_non_null(strstr(err, "administrator"));
    /* the secret's digest is what is stored, nothing else of it */
    redisReply *stored =
        vk_cmd(&f->server, "HGET lease:{t}:cred:key_abcdefghijklmnopqrstuvwxyz secret_digest");
    assert_string_equal(stored->str, digest);
    freeReplyObject(stored);

    lease_credential_t c;
    bool found = false;
    lease_deadline_t dl = lease_deadline_in(5000);
    assert_int_equal(
        lease_store_credential_lookup(f->store, "key_abcdefghijklmnopqrstuvwxyz", &dl, &c, &found),
        LEASE_INSPECTED);
    assert_true(found);
    assert_string_equal(c.principal_id, "svc-1");
    assert_string_equal(c.scope.tenant_id, "tenant-main");
    assert_string_equal(c.scope.program_id, "prog-a");
    assert_int_equal(c.scope.n_actors, 2);
    assert_false(c.scope.all_actors);
    assert_int_equal(c.capabilities, LEASE_CAP_LEASE | LEASE_CAP_READ);
    assert_false(c.admin);
    assert_false(c.revoked);
    assert_false(c.has_expiry);
    assert_int_equal(c.secret_digest[0], 0x00);
    assert_int_equal(c.secret_digest[1], 0x11);
    assert_int_equal(c.secret_digest[31], 0xff);
    assert_true(c.created_at_ms > 0);

    assert_int_equal(lease_store_credential_lookup(f->store, "key_nope", &dl, &c, &found),
                     LEASE_NOT_FOUND);
    assert_false(found);

    bool revoked = false;
    assert_int_equal(lease_valkey_credential_revoke(v, "key_abcdefghijklmnopqrstuvwxyz", &revoked,
                                                    err, sizeof err),
                     LEASE_INSPECTED);
    assert_true(revoked);
    assert_int_equal(lease_valkey_credential_revoke(v, "key_abcdefghijklmnopqrstuvwxyz", &revoked,
                                                    err, sizeof err),
                     LEASE_INSPECTED);
    assert_false(revoked); /* once */
    assert_int_equal(
        lease_store_credential_lookup(f->store, "key_abcdefghijklmnopqrstuvwxyz", &dl, &c, &found),
        LEASE_INSPECTED);
    assert_true(c.revoked);

    /* expiry judged at server time */
    redisReply *t = vk_cmd(&f->server, "TIME");
    long long now_ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    snprintf(req, sizeof req,
             "{\"credential_id\":\"key_cbcdefghijklmnopqrstuvwxyz\",\"principal_id\":\"svc-2\","
             "\"client_id\":\"c\",\"tenant_id\":\"t\",\"program_id\":\"*\",\"admin\":true,"
             "\"actor_names\":[\"*\"],\"capabilities\":[\"targets:revoke\"],"
             "\"secret_digest\":\"%s\",\"expires_at_ms\":%lld}",
             digest, now_ms + 600000);
    assert_int_equal(lease_valkey_credential_create(v, req, &row, err, sizeof err),
                     LEASE_INSPECTED);
    free(row);
    assert_int_equal(
        lease_store_credential_lookup(f->store, "key_cbcdefghijklmnopqrstuvwxyz", &dl, &c, &found),
        LEASE_INSPECTED);
    assert_true(c.admin && c.scope.all_actors && c.has_expiry);
    assert_true(c.expires_in_ms > 590000 && c.expires_in_ms <= 600000);
    assert_string_equal(c.scope.program_id, "*");

    /* the list: both, oldest first, never a digest */
    char *rows = NULL;
    assert_int_equal(lease_valkey_credential_list(v, &rows, err, sizeof err), LEASE_INSPECTED);
    assert_null(strstr(rows, "secret_digest"));
    assert_null(strstr(rows, digest));
    json_t *list = json_loads(rows, 0, NULL);
    free(rows);
    assert_int_equal(json_array_size(list), 2);
    json_t *first = json_array_get(list, 0), *second = json_array_get(list, 1);
    assert_string_equal(json_string_value(json_object_get(first, "credential_id")),
                        "key_abcdefghijklmnopqrstuvwxyz");
    assert_true(json_is_string(json_object_get(first, "revoked_at")));
    assert_true(json_is_null(json_object_get(first, "expires_at")));
    assert_int_equal(json_array_size(json_object_get(first, "actor_names")), 2);
    assert_true(json_is_false(json_object_get(first, "admin")));
    assert_string_equal(json_string_value(json_object_get(second, "credential_id")),
                        "key_cbcdefghijklmnopqrstuvwxyz");
    assert_true(json_is_null(json_object_get(second, "revoked_at")));
    assert_true(json_is_string(json_object_get(second, "expires_at")));
    assert_true(json_is_true(json_object_get(second, "admin")));
    json_decref(list);
}

static void not_built_answers_typed(void **state)
{
    fixture_t *f = *state;
    /* a fenced commit with a publication: the outbox is PostgreSQL's */
    lease_commit_req_t cq;
    memset(&cq, 0, sizeof cq);
    vk_fill_call(&cq.call, "p1", "c1", 'c', 5000);
    cq.n_writes = 1;
    cq.writes[0].kind = LEASE_WRITE_PUBLICATION;
    snprintf(cq.writes[0].key, sizeof cq.writes[0].key, "results");
    cq.writes[0].json = "{\"n\":1}";
    lease_commit_result_t cr;
    assert_int_equal(lease_store_fenced_commit(f->store, &cq, &cr), LEASE_BACKEND_UNAVAILABLE);
    assert_int_equal(cr.code, LEASE_BACKEND_UNAVAILABLE);
    /* audit events: appended to the namespace's Stream */
    lease_audit_event_t ev[2];
    memset(ev, 0, sizeof ev);
    ev[0].event_type = "target_lease_inspect";
    ev[0].code = LEASE_NOT_FOUND;
    ev[0].decision = "deny";
    ev[0].occurred_at_ms = 1700000000000;
    vk_fill_call(&ev[0].call, "p1", "c1", 'c', 5000);
    ev[1] = ev[0];
    ev[1].event_type = "target_lease_acquire";
    ev[1].code = LEASE_CONFLICT;
    lease_deadline_t dl = lease_deadline_in(5000);
    assert_int_equal(lease_store_record_audit(f->store, ev, 2, &dl), LEASE_INSPECTED);
    redisReply *x = vk_audit(&f->server, "lease:{t}:audit", false);
    assert_int_equal(x->elements, 2);
    const redisReply *first = x->element[0]->element[1];
    assert_string_equal(vk_str(first, "event_type"), "target_lease_inspect");
    assert_string_equal(vk_str(first, "code"), "lease_not_found");
    assert_string_equal(vk_str(first, "decision"), "deny");
    assert_string_equal(vk_str(first, "principal_id"), "p1");
    assert_string_equal(vk_str(first, "source"), "service");
    assert_string_equal(vk_str(first, "occurred_at_ms"), "1700000000000");
    assert_null(vk_str(first, "lease_id")); /* empty fields are left out */
    assert_string_equal(vk_str(x->element[1]->element[1], "code"), "lease_conflict");
    freeReplyObject(x);
    lease_housekeeping_result_t h;
    assert_int_equal(lease_store_housekeep(f->store, LEASE_STEP_NAMESPACE, 10, 0, &dl, &h),
                     LEASE_INSPECTED);
    assert_true(h.ran);
    lease_health_t hh;
    assert_int_equal(lease_store_health(f->store, &dl, &hh), LEASE_INSPECTED);
    assert_true(hh.reachable && hh.schema_current && !hh.sealed);
    lease_store_stats_t st;
    lease_store_stats(f->store, &st);
    assert_int_equal(st.backend_errors, 1); /* the commit */

    /* a restart seals: the namespace step reports it */
    assert_true(vk_restart(&f->server, NULL));
    dl = lease_deadline_in(5000);
    assert_int_equal(lease_store_housekeep(f->store, LEASE_STEP_NAMESPACE, 10, 0, &dl, &h),
                     LEASE_BACKEND_UNAVAILABLE);
}

/* The sweeper's expiry step on Valkey: a lease nobody takes goes to
 * history once expired grace_ms ago (leased_v1_expire_due). */
static void expire_step_moves_leases_nobody_takes(void **state)
{
    fixture_t *f = *state;
    lease_record_t l = acquire(f, "p1", "prog-a", "t-exp", "actor-a", 1100);
    lease_deadline_t dl = lease_deadline_in(5000);
    lease_housekeeping_result_t h;
    assert_int_equal(lease_store_housekeep(f->store, LEASE_STEP_EXPIRE, 10, 0, &dl, &h),
                     LEASE_INSPECTED);
    assert_true(h.ran);
    assert_int_equal(h.expired, 0);
    lease_sleep_ms(1300);
    dl = lease_deadline_in(5000);
    assert_int_equal(lease_store_housekeep(f->store, LEASE_STEP_EXPIRE, 10, 0, &dl, &h),
                     LEASE_INSPECTED);
    assert_true(h.ran);
    assert_int_equal(h.expired, 1);
    assert_false(h.more);
    assert_true(h.lag_ms >= 100);
    redisReply *r = vk_cmd(&f->server, "HGET lease:{t}:h:%s state", l.lease_id);
    assert_string_equal(r->str, "expired");
    freeReplyObject(r);
    dl = lease_deadline_in(5000);
    assert_int_equal(lease_store_housekeep(f->store, LEASE_STEP_EXPIRE, 10, 0, &dl, &h),
                     LEASE_INSPECTED);
    assert_int_equal(h.expired, 0);
}

static void store_urls(void **state)
{
    (void)state;
    lease_valkey_url_t u;
    char err[256] = "";
    assert_true(lease_valkey_url_is("redis://h"));
    assert_true(lease_valkey_url_is("valkey://h"));
    assert_false(lease_valkey_url_is("postgres://h"));
    assert_true(
        lease_valkey_url_parse("redis://127.0.0.1:7001/0?namespace=ab-1", &u, err, sizeof err));
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 7001);
    assert_string_equal(u.ns, "ab-1");
    assert_true(lease_valkey_url_parse("valkey://db.example", &u, err, sizeof err));
    assert_int_equal(u.port, 6379);
    assert_string_equal(u.ns, "leased");
    /* TLS by the scheme; the rest read alike */
    assert_true(lease_valkey_url_parse("rediss://h:1?namespace=n", &u, err, sizeof err));
    assert_true(u.tls);
    assert_string_equal(u.host, "h");
    assert_int_equal(u.port, 1);
    assert_string_equal(u.ns, "n");
    assert_true(lease_valkey_url_parse("valkeys://:pw@h", &u, err, sizeof err));
    assert_true(u.tls);
    assert_string_equal(u.password, "pw");
    assert_int_equal(u.port, 6379);
    assert_true(lease_valkey_url_parse("redis://h", &u, err, sizeof err));
    assert_false(u.tls);
    assert_false(lease_valkey_url_parse("redisss://h", &u, err, sizeof err));
    /* credentials, percent-decoded; messages never quote them */
    assert_true(lease_valkey_url_parse("redis://svc:p%40ss%3Aw%2Frd@h:1/0?namespace=n", &u, err,
                                       sizeof err));
    assert_string_equal(u.user, "svc");
    assert_string_equal(u.password, "p@ss:w/rd");
    assert_string_equal(u.host, "h");
    assert_int_equal(u.port, 1);
    assert_string_equal(u.ns, "n");
    lease_valkey_url_wipe(&u);
    assert_string_equal(u.password, "");
    assert_true(lease_valkey_url_parse("redis://:only-pw@h", &u, err, sizeof err));
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "only-pw");
    assert_false(lease_valkey_url_parse("redis://svc@h", &u, err, sizeof err));
    assert_false(lease_valkey_url_parse("redis://svc:@h", &u, err, sizeof err));
    assert_false(lease_valkey_url_parse("redis://svc:qx7%zzpw@h", &u, err, sizeof err));
    assert_null(strstr(err, "qx7"));
    assert_false(lease_valkey_url_parse("redis://svc:secretpw@h:99999", &u, err, sizeof err));
    assert_null(strstr(err, "secretpw"));
    assert_false(lease_valkey_url_parse("redis://h:1/3", &u, err, sizeof err));
    assert_false(lease_valkey_url_parse("redis://h:99999", &u, err, sizeof err));
    assert_false(lease_valkey_url_parse("redis://h?namespace=A!", &u, err, sizeof err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(list_scoped_and_paged, setup, teardown),
        cmocka_unit_test_setup_teardown(credentials_digest_only, setup, teardown),
        cmocka_unit_test_setup_teardown(not_built_answers_typed, setup, teardown),
        cmocka_unit_test_setup_teardown(expire_step_moves_leases_nobody_takes, setup, teardown),
        cmocka_unit_test(store_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
