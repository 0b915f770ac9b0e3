/*
 * race_session_audit.c - the audit events of a lease held in a session
 * name the session (issue 37; docs/schema.md, lease.audit_events):
 * its acquire, renewal and release each carry session_id, and the events
 * of a lease without a session carry none. What the database holds is
 * the judge.
 */
#include "race_sessions.h"

#define APP "race_session_audit"

static race_env_t env;

/* Events of lease_id, and how many of them name session (NULL: none). */
static void events_of(const char *lease_id, const char *session, long long *all, long long *named)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.audit_events WHERE lease_id = '%s'",
             lease_id);
    *all = testpg_query_int(env.db_url, sql);
    if (session)
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.audit_events WHERE lease_id = '%s' AND session_id = "
                 "'%s'",
                 lease_id, session);
    else
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.audit_events WHERE lease_id = '%s' AND session_id "
                 "IS NULL",
                 lease_id);
    *named = testpg_query_int(env.db_url, sql);
}

/* Renews and releases lease (as principal), each answered as expected. */
static void renew_and_release(const lease_record_t *lease, const char *principal)
{
    char rid[128];
    lease_owner_req_t req;
    lease_result_t res;
    race_rid(rid, sizeof rid, "renew", 0, 0);
    race_owner_req(&req, lease, rid, principal, "inst-sess", 30000, true, 10000);
    CHECK(lease_store_renew(env.store, &req, &res) == LEASE_RENEWED, "renew: %s", CODE(res.code));
    race_rid(rid, sizeof rid, "release", 0, 0);
    race_owner_req(&req, lease, rid, principal, "inst-sess", 0, false, 10000);
    CHECK(lease_store_release(env.store, &req, &res) == LEASE_RELEASED, "release: %s",
          CODE(res.code));
}

int main(void)
{
    race_setup(&env, APP, 2, APP);
    lease_session_t s = race_session_open(env.store, "prn-holder", 30000);
    lease_identity_t in_session, alone;
    race_identity(&in_session, "audit-in-session");
    race_identity(&alone, "audit-alone");
    lease_record_t a = race_acquire_in_session(env.store, &in_session, "prn-holder", s.session_id);
    lease_record_t b = race_acquire_ok(env.store, &alone, "audit-alone", "prn-holder", "inst-sess");
    renew_and_release(&a, "prn-holder");
    renew_and_release(&b, "prn-holder");

    long long all, named;
    events_of(a.lease_id, s.session_id, &all, &named);
    printf("a lease in a session: %lld events, %lld name the session\n", all, named);
    CHECK(all == 3 && named == 3,
          "acquire, renew and release of a lease in a session: %lld of "
          "%lld events name it",
          named, all);
    events_of(b.lease_id, NULL, &all, &named);
    printf("a lease without a session: %lld events, %lld name none\n", all, named);
    CHECK(all == 3 && named == 3, "a lease without a session: %lld of %lld events name none", named,
          all);
    race_teardown(&env);
    return 0;
}
