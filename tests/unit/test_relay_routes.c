/*
 * test_relay_routes.c - LEASE_RELAY_ROUTES: exact topics and prefixes,
 * first match wins, the default exchange for the rest, fixed routing keys,
 * CouchDB routes, the distinct exchanges to declare, and every malformed
 * entry refused with the entry named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "relay/relay_routes.h"

static void lookup_is(const relay_routes_t *r, const char *topic, relay_dest_kind_t kind,
                      const char *target, const char *key)
{
    relay_destination_t d = relay_routes_lookup(r, topic);
    assert_int_equal(d.kind, kind);
    assert_string_equal(d.target, target);
    if (key)
        assert_string_equal(d.routing_key, key);
    else
        assert_null(d.routing_key);
}

static void test_routes_and_default(void **state)
{
    (void)state;
    char err[256];
    relay_routes_t *r = relay_routes_parse(
        " alerts.high=amqp:alerts/pager.high , alerts.*=amqp:alerts,state.*=couchdb:targets,"
        "exact.topic=amqp:",
        "leased.outbox", err, sizeof err);
    assert_non_null(r);
    lookup_is(r, "alerts.high", RELAY_DEST_AMQP, "alerts", "pager.high"); /* first match wins */
    lookup_is(r, "alerts.low", RELAY_DEST_AMQP, "alerts", NULL);
    lookup_is(r, "alerts", RELAY_DEST_AMQP, "leased.outbox", NULL); /* the prefix is "alerts." */
    lookup_is(r, "state.t1", RELAY_DEST_COUCHDB, "targets", NULL);
    lookup_is(r, "exact.topic", RELAY_DEST_AMQP, "", NULL); /* RabbitMQ's default exchange */
    lookup_is(r, "exact.topic2", RELAY_DEST_AMQP, "leased.outbox", NULL);
    lookup_is(r, "results/x:1", RELAY_DEST_AMQP, "leased.outbox", NULL);
    assert_true(relay_routes_use_couchdb(r));
    size_t n;
    const char *const *ex = relay_routes_exchanges(r, &n);
    assert_int_equal(n, 3);
    assert_string_equal(ex[0], "leased.outbox");
    assert_string_equal(ex[1], "alerts");
    assert_string_equal(ex[2], "");
    relay_routes_free(r);

    r = relay_routes_parse("*=amqp:all", "leased.outbox", err, sizeof err);
    assert_non_null(r);
    lookup_is(r, "anything.at.all", RELAY_DEST_AMQP, "all", NULL);
    assert_false(relay_routes_use_couchdb(r));
    relay_routes_free(r);

    r = relay_routes_parse("", "leased.outbox", err, sizeof err);
    assert_non_null(r);
    lookup_is(r, "x", RELAY_DEST_AMQP, "leased.outbox", NULL);
    relay_routes_free(r);
    r = relay_routes_parse(NULL, "", err, sizeof err);
    assert_non_null(r);
    lookup_is(r, "q.name", RELAY_DEST_AMQP, "", NULL);
    relay_routes_free(r);
}

static void test_bad_routes(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *exchange, *must_name;
    } bad[] = {
        {"alerts.*", "x", "alerts.*"},                /* no = */
        {"alerts.*=kafka:topic", "x", "kafka:topic"}, /* unknown kind */
        {"al erts=amqp:x", "x", "al erts"},           /* bad pattern */
        {"a*b=amqp:x", "x", "a*b"},                   /* star inside */
        {"=amqp:x", "x", "pattern"},                  /* empty pattern */
        {"a=amqp:bad exchange", "x", "bad exchange"}, /* bad exchange */
        {"a=amqp:amq.direct", "x", "amq.direct"},     /* reserved */
        {"a=amqp:x/bad key", "x", "bad key"},         /* bad key */
        {"a=amqp:x/", "x", "routing key"},            /* empty key */
        {"a=couchdb:Targets", "x", "Targets"},        /* CouchDB names are lower-case */
        {"a=couchdb:", "x", "CouchDB"},               /* empty database */
        {"", "bad exchange", "bad exchange"},         /* bad default */
        {"", "amq.topic", "amq.topic"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        relay_routes_t *r = relay_routes_parse(bad[i].spec, bad[i].exchange, err, sizeof err);
        if (r || !strstr(err, bad[i].must_name))
            fail_msg("'%s' (exchange '%s'): %s", bad[i].spec, bad[i].exchange,
                     r ? "accepted" : err);
    }
}

static void test_topic_rules(void **state)
{
    (void)state;
    assert_true(relay_routes_topic_valid("results.ready", false));
    assert_true(relay_routes_topic_valid("a/b:c-d_e.f", false));
    assert_false(relay_routes_topic_valid("", false));
    assert_false(relay_routes_topic_valid("a*", false));
    assert_true(relay_routes_topic_valid("a*", true));
    assert_true(relay_routes_topic_valid("*", true));
    assert_false(relay_routes_topic_valid("**", true));
    char long_topic[300];
    memset(long_topic, 'a', 257);
    long_topic[257] = '\0';
    assert_false(relay_routes_topic_valid(long_topic, false));
    long_topic[256] = '\0';
    assert_true(relay_routes_topic_valid(long_topic, false));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_and_default),
        cmocka_unit_test(test_bad_routes),
        cmocka_unit_test(test_topic_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
