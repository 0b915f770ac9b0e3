/*
 * valkey_pool.c - the Valkey adapter's connection pool (docs/backends.md,
 * "Connection pool"), against real servers. With LEASE_VALKEY_MIN_REPLICAS
 * and a frozen replica a write holds its connection in WAIT until its
 * deadline: with LEASE_DB_POOL_SIZE=1 a read behind it waits as long; with
 * 4 the read takes another connection and answers at once. Connections the
 * server kills (CLIENT KILL) are dropped by the call that meets them and
 * opened again by the next, so the adapter recovers by itself.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_client.h"
#include "leased_proc.h"
#include "lease/clock.h"
#include "lease/store_valkey.h"
#include "valkey_service.h"

typedef struct waiting_write {
    const char *base, *token, *rid;
    long status;
} waiting_write_t;

/* An acquire that waits in WAIT for a frozen replica until its deadline. */
static void *write_that_waits(void *arg)
{
    waiting_write_t *w = arg;
    http_resp_t *r = vk_post_within(w->base, "/v1/leases/acquire", w->token,
                                    vk_http_acquire(w->rid, w->rid, "inst_a", 60000), 2500);
    w->status = r->status;
    http_resp_free(r);
    return NULL;
}

/* The ordinary clients (no replica link, no subscriber) but leased's watch
 * feed (named leased-watch): the test's own and leased's pool. */
static long long connected_clients(vk_server_t *s)
{
    redisReply *r = vk_cmd(s, "CLIENT LIST TYPE normal");
    long long n = -1;
    if (r->type == REDIS_REPLY_STRING) {
        n = 0;
        for (const char *p = r->str; *p;) {
            const char *end = strchr(p, '\n');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)len, p);
            if (len > 1 && strstr(line, " name=leased-watch ") == NULL)
                n++;
            p += len + (end ? 1 : 0);
        }
    }
    freeReplyObject(r);
    return n;
}

/* How long (ms) an inspect takes while a write of the same leased waits
 * in WAIT for the frozen replica; pool: LEASE_DB_POOL_SIZE. *clients: the
 * primary's connected clients meanwhile. */
static int64_t read_behind_a_wait(vk_server_t *primary, vk_server_t *replica, const char *token,
                                  int pool, long long *clients)
{
    char pool_env[64];
    snprintf(pool_env, sizeof pool_env, "LEASE_DB_POOL_SIZE=%d", pool);
    const char *extra[] = {"LEASE_VALKEY_MIN_REPLICAS=1", pool_env, NULL};
    leased_proc_t *srv = vk_leased_start(primary, extra);
    const char *base = leased_proc_url(srv);
    char rid[32];
    snprintf(rid, sizeof rid, "held-%d", pool);
    http_resp_t *r = vk_post_within(base, "/v1/leases/acquire", token,
                                    vk_http_acquire(rid, rid, "inst_a", 60000), 3000);
    vk_expect_code(r, 200, "lease_acquired"); /* the replica in sync */
    http_resp_free(r);

    pid_t rpid = vk_pid(replica);
    assert_int_equal(kill(rpid, SIGSTOP), 0);
    waiting_write_t w = {.base = base, .token = token};
    char wrid[32];
    snprintf(wrid, sizeof wrid, "waits-%d", pool);
    w.rid = wrid;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, write_that_waits, &w), 0);
    lease_sleep_ms(300); /* the write is in its WAIT by now */
    assert_int_equal(vk_metric(base, "leased_db_pool_size"), pool);
    assert_true(vk_metric(base, "leased_db_pool_in_use") >= 1); /* the WAIT's */
    int64_t began = lease_mono_now_ns();
    r = vk_post_within(base, "/v1/leases/inspect", token,
                       json_pack("{s:o}", "lock_identity", vk_identity(rid)), 5000);
    int64_t took_ms = (lease_mono_now_ns() - began) / 1000000;
    vk_expect_code(r, 200, "lease_inspected");
    http_resp_free(r);
    *clients = connected_clients(primary);
    pthread_join(th, NULL);
    assert_int_equal(w.status, 503); /* lease_outcome_unknown: unconfirmed */
    assert_int_equal(kill(rpid, SIGCONT), 0);
    assert_int_equal(leased_proc_stop(srv), 0);
    return took_ms;
}

static void a_wait_holds_one_connection(void **state)
{
    (void)state;
    vk_server_t primary, replica;
    memset(&primary, 0, sizeof primary);
    memset(&replica, 0, sizeof replica);
    assert_true(vk_start(&primary));
    assert_true(vk_start_replica(&replica, &primary));
    char *alice = vk_worker(&primary, "alice");

    long long clients_one = 0, clients_four = 0;
    int64_t one = read_behind_a_wait(&primary, &replica, alice, 1, &clients_one);
    int64_t four = read_behind_a_wait(&primary, &replica, alice, 4, &clients_four);
    print_message("inspect behind a WAIT: pool 1 %lld ms, pool 4 %lld ms\n", (long long)one,
                  (long long)four);
    /* one connection: the read waits out the write's WAIT (2.5 s deadline,
     * begun 0.3 s before); four: another connection answers at once */
    if (one < 1500)
        fail_msg("with one connection the read did not wait for the WAIT: %lld ms", (long long)one);
    if (four > 500)
        fail_msg("with four connections the read waited: %lld ms", (long long)four);
    /* the test's own connection (connected_clients leaves the replica's
     * link out), plus leased's: one under pool 1, at least two (the WAIT's
     * and the read's) under pool 4 */
    assert_int_equal(clients_one, 2);
    assert_true(clients_four >= 3);
    free(alice);
    vk_stop(&replica);
    vk_stop(&primary);
}

typedef struct reader {
    lease_valkey_t *v;
    int ok;
} reader_t;

static void *health_calls(void *arg)
{
    reader_t *r = arg;
    for (int i = 0; i < 50; i++) {
        lease_deadline_t dl = lease_deadline_in(2000);
        lease_health_t h;
        if (lease_valkey_health(r->v, &dl, &h) == LEASE_INSPECTED)
            r->ok++;
    }
    return NULL;
}

static void broken_connections_reconnect(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char err[256] = "";
    lease_valkey_config_t cfg = {
        .host = "127.0.0.1", .port = s.port, .ns = "leased", .pool_size = 3};
    lease_valkey_t *v = NULL;
    assert_int_equal(lease_valkey_open(&cfg, &v, err, sizeof err), LEASE_INSPECTED);
    int64_t epoch = -1;
    assert_int_equal(lease_valkey_bind(v, 0, &epoch, err, sizeof err), LEASE_INSPECTED);
    /* six threads at once: every connection of the pool in use */
    pthread_t th[6];
    reader_t rd[6];
    for (int i = 0; i < 6; i++) {
        rd[i] = (reader_t){.v = v};
        assert_int_equal(pthread_create(&th[i], NULL, health_calls, &rd[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(rd[i].ok, 50);
    }
    /* never more than the pool: 3 and the test's own */
    assert_true(connected_clients(&s) <= 4);

    /* the server drops every client but the test's own */
    redisReply *k = vk_cmd(&s, "CLIENT KILL TYPE normal SKIPME yes");
    assert_int_equal(k->type, REDIS_REPLY_INTEGER);
    assert_true(k->integer >= 1);
    freeReplyObject(k);
    /* each dead connection fails the one call that meets it (nothing was
     * decided: a read), then is opened again */
    int failures = 0, in_a_row = 0;
    for (int i = 0; i < 40 && in_a_row < 20; i++) {
        lease_deadline_t dl = lease_deadline_in(2000);
        lease_health_t h;
        if (lease_valkey_health(v, &dl, &h) == LEASE_INSPECTED) {
            in_a_row++;
        } else {
            failures++;
            in_a_row = 0;
        }
    }
    assert_int_equal(in_a_row, 20);
    assert_true(failures <= 3);
    lease_valkey_close(v);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_wait_holds_one_connection),
        cmocka_unit_test(broken_connections_reconnect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
