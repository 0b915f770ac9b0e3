/*
 * valkey_watch.c - the feed of ended leases on Valkey (docs/backends.md,
 * "Watch on Valkey"), against real redis-servers:
 *
 * - every leased_v1 function that ends a lease (release, release_many,
 *   force_release, revoke, an acquire that takes over an expired lease,
 *   expire_due, rebind) PUBLISHes the lease's id on lease:{ns}:ended, heard
 *   by a plain SUBSCRIBE; calls that end nothing (a refused release, a
 *   renew, a replay) publish nothing;
 * - leased_v1_watch_ended (the hub's poll) answers which of the ids given
 *   are not active: ended, expired but not yet swept, unknown;
 * - Pub/Sub is at-most-once: leased's subscriber is CLIENT KILLed in the
 *   same MULTI/EXEC as the release of a watched lease, so that release's
 *   message reaches nobody. The watch (parked, with LEASE_WATCH_POLL_MS at
 *   its 60 s maximum, longer than the watch's wait) still answers
 *   "released": leased makes its session again and polls at once, as on
 *   PostgreSQL after a new LISTEN session; no notification was heard. The
 *   next end, on the new subscription, is pushed;
 * - an ACL user without the channel: ends still answer, watches poll.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "valkey_service.h"

#define CHANNEL "lease:{t}:ended" /* the channel of VK_NS_KEY's namespace */

/* A connection of its own subscribed to CHANNEL. */
static redisContext *subscriber(const vk_server_t *s)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    assert_true(c != NULL && !c->err);
    assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
    redisReply *r = redisCommand(c, "SUBSCRIBE %s", CHANNEL);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    return c;
}

/* The next message on the subscriber is lease_id's id (within 5 s). */
static void next_message_is(redisContext *sub, const char *lease_id)
{
    void *got = NULL;
    assert_int_equal(redisGetReply(sub, &got), REDIS_OK);
    redisReply *r = got;
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[0]->str, "message");
    assert_string_equal(r->element[1]->str, CHANNEL);
    assert_string_equal(r->element[2]->str, lease_id);
    freeReplyObject(r);
}

/* An acquire of target by p1 (ttl 0: the default); the answer. */
static redisReply *acquire(vk_server_t *s, const char *rid, const char *target, int64_t ttl)
{
    redisReply *r = vk_fcall(s, "acquire", vk_acquire_req("p1", rid, 'a', target, "inst-1", ttl));
    vk_assert_code(r, "lease_acquired");
    return r;
}

static json_t *owner_req(const char *rid, const char *target, const redisReply *held)
{
    return vk_owner_req("p1", rid, 'b', target, vk_str(vk_lease(held), "lease_id"),
                        vk_int(vk_lease(held), "fencing_token"), "inst-1");
}

static json_t *admin_req(const char *rid, const char *target, const redisReply *held)
{
    json_t *o = vk_call("admin", rid, 'c');
    json_object_set_new(o, "lock_identity", vk_identity(target));
    json_object_set_new(o, "lease_id", json_string(vk_str(vk_lease(held), "lease_id")));
    json_object_set_new(o, "fencing_token", json_integer(vk_int(vk_lease(held), "fencing_token")));
    json_object_set_new(o, "reason", json_string("watch test"));
    return o;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void every_end_publishes_its_lease_id(void **state)
{
    vk_server_t *s = *state;
    redisContext *sub = subscriber(s);

    /* release; a refused release, a renew and a replay before it publish
     * nothing: the next message is the release's */
    redisReply *a = acquire(s, "r1", "w_release", 0);
    json_t *wrong = owner_req("x0", "w_release", a);
    json_object_set_new(wrong, "fencing_token",
                        json_integer(vk_int(vk_lease(a), "fencing_token") + 1));
    redisReply *r = vk_fcall(s, "release", wrong);
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "renew", owner_req("n1", "w_release", a));
    vk_assert_code(r, "lease_renewed");
    freeReplyObject(r);
    r = vk_fcall(s, "release", owner_req("x1", "w_release", a));
    vk_assert_code(r, "lease_released");
    freeReplyObject(r);
    r = vk_fcall(s, "release", owner_req("x1", "w_release", a)); /* the replay */
    vk_assert_code(r, "lease_released");
    assert_int_equal(vk_int(r, "replayed"), 1);
    freeReplyObject(r);
    next_message_is(sub, vk_str(vk_lease(a), "lease_id"));

    /* release_many */
    redisReply *b = acquire(s, "r2", "w_many", 0);
    r = vk_fcall(s, "release_many", json_pack("{s:[o]}", "releases", owner_req("x2", "w_many", b)));
    freeReplyObject(r);
    next_message_is(sub, vk_str(vk_lease(b), "lease_id"));

    /* force_release and revoke */
    redisReply *c = acquire(s, "r3", "w_force", 0);
    r = vk_fcall(s, "force_release", admin_req("f1", "w_force", c));
    vk_assert_code(r, "lease_released");
    freeReplyObject(r);
    next_message_is(sub, vk_str(vk_lease(c), "lease_id"));
    redisReply *d = acquire(s, "r4", "w_revoke", 0);
    r = vk_fcall(s, "revoke", admin_req("v1", "w_revoke", d));
    vk_assert_code(r, "lease_revoked");
    freeReplyObject(r);
    next_message_is(sub, vk_str(vk_lease(d), "lease_id"));

    /* an acquire over an expired lease ends it */
    redisReply *e = acquire(s, "r5", "w_takeover", 50);
    sleep_ms(120);
    r = vk_fcall(s, "acquire", vk_acquire_req("p2", "r6", 'd', "w_takeover", "inst-2", 0));
    vk_assert_code(r, "lease_acquired");
    assert_string_equal(vk_str(r, "previous_state"), "expired");
    freeReplyObject(r);
    next_message_is(sub, vk_str(vk_lease(e), "lease_id"));

    /* the expiry step */
    redisReply *f = acquire(s, "r7", "w_expire", 50);
    sleep_ms(120);
    r = vk_cmd(s, "FCALL leased_v1_expire_due 1 %s %s", VK_NS_KEY, "{\"batch\":10,\"grace_ms\":0}");
    assert_int_equal(vk_int(r, "expired"), 1);
    freeReplyObject(r);
    next_message_is(sub, vk_str(vk_lease(f), "lease_id"));

    /* a rebind revokes every live lease */
    redisReply *g = acquire(s, "r8", "w_rebind", 0);
    r = vk_cmd(s, "FCALL leased_v1_rebind 1 %s %s", VK_NS_KEY, "{\"reason\":\"drill\"}");
    assert_int_equal(vk_int(r, "leases_revoked"), 2); /* w_rebind and w_takeover's new one */
    freeReplyObject(r);
    void *m1 = NULL, *m2 = NULL;
    assert_int_equal(redisGetReply(sub, &m1), REDIS_OK);
    assert_int_equal(redisGetReply(sub, &m2), REDIS_OK);
    const char *g_id = vk_str(vk_lease(g), "lease_id");
    assert_true(strcmp(((redisReply *)m1)->element[2]->str, g_id) == 0 ||
                strcmp(((redisReply *)m2)->element[2]->str, g_id) == 0);
    freeReplyObject(m1);
    freeReplyObject(m2);

    redisReply *held[] = {a, b, c, d, e, f, g};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
        freeReplyObject(held[i]);
    redisFree(sub);
}

/* The hub's poll: which ids are not active now, in the order given. */
static void watch_ended_reports_what_is_not_active(void **state)
{
    vk_server_t *s = *state;
    redisReply *live = acquire(s, "r1", "p_live", 0);
    redisReply *gone = acquire(s, "r2", "p_gone", 0);
    redisReply *lapsed = acquire(s, "r3", "p_lapsed", 50);
    redisReply *r = vk_fcall(s, "release", owner_req("x1", "p_gone", gone));
    vk_assert_code(r, "lease_released");
    freeReplyObject(r);
    sleep_ms(120); /* lapsed expired; nothing swept it */
    r = vk_cmd(s, "FCALL_RO leased_v1_watch_ended 1 %s %s %s %s %s", VK_NS_KEY,
               vk_str(vk_lease(live), "lease_id"), vk_str(vk_lease(gone), "lease_id"),
               vk_str(vk_lease(lapsed), "lease_id"), "lease_unknown");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[0]->str, vk_str(vk_lease(gone), "lease_id"));
    assert_string_equal(r->element[1]->str, vk_str(vk_lease(lapsed), "lease_id"));
    assert_string_equal(r->element[2]->str, "lease_unknown");
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL_RO leased_v1_watch_ended 1 %s", VK_NS_KEY);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 0);
    freeReplyObject(r);
    freeReplyObject(live);
    freeReplyObject(gone);
    freeReplyObject(lapsed);
}

static void a_lost_message_is_found_by_the_poll(void **state)
{
    vk_server_t *s = *state;
    lease_valkey_t *v = vk_open_bound(s, "t"); /* bound already: changes nothing */
    assert_non_null(v);
    char *reader = vk_make_credential(v, "reader", NULL);
    lease_valkey_close(v);
    char url[128];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://127.0.0.1:%d?namespace=t", s->port);
    /* the periodic poll never comes within the watches' waits */
    const char *env[] = {url, "LEASE_WATCH_POLL_MS=60000", NULL};
    leased_proc_t *srv = leased_proc_start(NULL, env);
    assert_non_null(srv);
    const char *base = leased_proc_url(srv);

    redisReply *a = acquire(s, "r1", "lost_1", 0);
    vk_watcher_t w;
    vk_watch_start(&w, base, reader, vk_str(vk_lease(a), "lease_id"), 20000);
    vk_wait_metric(base, "leased_watches_waiting", 1);
    vk_wait_metric(base, "leased_watch_listening", 1);

    /* the subscriber killed and the lease released in one transaction:
     * the message is published to nobody */
    json_t *release_req = owner_req("x1", "lost_1", a);
    char *release = json_dumps(release_req, JSON_COMPACT);
    json_decref(release_req);
    redisReply *r = vk_cmd(s, "MULTI");
    freeReplyObject(r);
    freeReplyObject(vk_cmd(s, "CLIENT KILL TYPE pubsub"));
    freeReplyObject(vk_cmd(s, "FCALL leased_v1_release 1 %s %s", VK_NS_KEY, release));
    r = vk_cmd(s, "EXEC");
    free(release);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    assert_int_equal(r->element[0]->integer, 1); /* leased's subscriber */
    vk_assert_code(r->element[1], "lease_released");
    freeReplyObject(r);

    char *st = vk_watch_state(&w);
    assert_string_equal(st, "released"); /* not "active" after 20 s */
    free(st);
    assert_int_equal(vk_metric(base, "leased_watch_notifications_total"), 0);
    assert_true(vk_metric(base, "leased_watch_polls_total") >= 1);
    assert_int_equal(vk_metric(base, "leased_watch_woken_by_end_total"), 1);

    /* subscribed again: the next end is pushed (the poll is a minute off) */
    vk_wait_metric(base, "leased_watch_listening", 1);
    redisReply *b = acquire(s, "r2", "lost_2", 0);
    vk_watch_start(&w, base, reader, vk_str(vk_lease(b), "lease_id"), 20000);
    vk_wait_metric(base, "leased_watches_waiting", 1);
    r = vk_fcall(s, "release", owner_req("x2", "lost_2", b));
    vk_assert_code(r, "lease_released");
    freeReplyObject(r);
    st = vk_watch_state(&w);
    assert_string_equal(st, "released");
    free(st);
    assert_int_equal(vk_metric(base, "leased_watch_notifications_total"), 1);

    assert_int_equal(leased_proc_stop(srv), 0);
    freeReplyObject(a);
    freeReplyObject(b);
    free(reader);
}

/* An ACL user without the channel (Redis 7's default for new users:
 * acl-pubsub-default resetchannels): a function's PUBLISH is refused, yet
 * the release it ends still answers lease_released (the publish is the
 * call's last, best-effort write), and leased's watch, refused SUBSCRIBE,
 * falls back to polling and still learns of the end. */
static void a_user_without_the_channel_still_ends_and_polls(void **state)
{
    vk_server_t *s = *state;
    freeReplyObject(vk_cmd(s, "ACL SETUSER nochan on >nochan-pw ~* resetchannels +@all"));
    lease_valkey_t *v = vk_open_bound(s, "t");
    assert_non_null(v);
    char *worker = vk_make_credential(v, "worker", NULL);
    lease_valkey_close(v);
    char url[160];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://nochan:nochan-pw@127.0.0.1:%d?namespace=t",
             s->port);
    const char *env[] = {url, "LEASE_WATCH_POLL_MS=200", NULL};
    leased_proc_t *srv = leased_proc_start(NULL, env);
    assert_non_null(srv);
    const char *base = leased_proc_url(srv);

    http_resp_t *held =
        vk_post_expect(base, "/v1/leases/acquire", worker,
                       vk_http_acquire("a1", "nochan_1", "inst_a", 30000), 200, "lease_acquired");
    vk_watcher_t w;
    vk_watch_start(&w, base, worker, json_string_value(http_resp_get(held, "lease.lease_id")),
                   20000);
    vk_wait_metric(base, "leased_watches_waiting", 1);
    http_resp_t *r =
        vk_post_expect(base, "/v1/leases/release", worker,
                       vk_http_owner("x1", "nochan_1", held, "inst_a"), 200, "lease_released");
    http_resp_free(r);
    char *st = vk_watch_state(&w);
    assert_string_equal(st, "released"); /* not "active" after 20 s */
    free(st);
    assert_int_equal(vk_metric(base, "leased_watch_session_up"), 1);
    assert_int_equal(vk_metric(base, "leased_watch_listening"), 0);
    char *log = leased_proc_log(srv);
    assert_non_null(strstr(log, "polling only"));
    free(log);
    assert_int_equal(leased_proc_stop(srv), 0);
    http_resp_free(held);
    free(worker);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_end_publishes_its_lease_id, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(watch_ended_reports_what_is_not_active,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(a_lost_message_is_found_by_the_poll,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(a_user_without_the_channel_still_ends_and_polls,
                                        vk_fixture_library_bound, vk_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
