/*
 * testbroker.h - the relay tests' RabbitMQ (tests/harness/rabbitcluster,
 * fixture "rabbit") and a consumer for it (librabbitmq).
 *
 *   testbroker_consumer_t *c = testbroker_consumer_new("leased.test.x", "#", "q.x");
 *   testbroker_msg_t *m = testbroker_next(c, 5000);     // NULL after 5 s without one
 *   ... m->message_id, testbroker_msg_header(m, "fencing_token") ...
 *   testbroker_msg_free(m);
 *   testbroker_consumer_free(c);                          // deletes the queue
 *
 * Each test names its own exchanges and queues, so tests share the broker
 * like they share the Postgres cluster. The consumer reconnects by itself
 * after the broker was paused and resumed (its queue is durable and its
 * messages persistent, so they survive).
 */
#ifndef LEASE_TEST_BROKER_H
#define LEASE_TEST_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* amqp://guest:guest@127.0.0.1:PORT of the fixture's broker. */
const char *testbroker_url(void);
/* The broker's amqps:// listener on 127.0.0.1 (certificate for
 * "localhost"), 0 when the tests do not own the broker; the folder of
 * ca.crt (its CA) and client.crt/client.key (a client certificate that CA
 * signed). */
int testbroker_tls_port(void);
const char *testbroker_tls_dir(void);
/* Whether the tests own the broker (so they may pause, freeze it). */
bool testbroker_owned(void);
/* Stops the node keeping its data / starts it again / SIGSTOP / SIGCONT. */
bool testbroker_pause(void);
bool testbroker_resume(void);
bool testbroker_freeze(void);
bool testbroker_thaw(void);
/* Prints the tail of the broker's logs to stderr. */
void testbroker_dump_log(void);

typedef struct testbroker_msg {
    char *message_id;
    char *type;
    char *content_type;
    char *correlation_id; /* NULL when absent */
    char *app_id;
    uint8_t delivery_mode;
    uint64_t timestamp;
    char *body;
    size_t body_len;
    bool redelivered;
    size_t n_headers;
    char **header_names;
    char **header_values; /* integers in decimal */
    char *routing_key;
    char *exchange;
} testbroker_msg_t;

typedef struct testbroker_consumer testbroker_consumer_t;

/*
 * Declares exchange (a durable topic exchange, unless "" - the default
 * exchange) and a durable queue, binds it with binding_key and consumes
 * from it (acknowledging each message as it is read). Aborts the test on
 * failure.
 */
testbroker_consumer_t *testbroker_consumer_new(const char *exchange, const char *binding_key,
                                               const char *queue);
/* The next message within timeout_ms, or NULL. Reconnects when the broker
 * went away (within the same timeout). */
testbroker_msg_t *testbroker_next(testbroker_consumer_t *c, int timeout_ms);
/* Messages ready in the queue (passive declare), -1 on failure. */
long testbroker_queue_depth(testbroker_consumer_t *c);
/* Deletes the queue and closes the connection; accepts NULL. */
void testbroker_consumer_free(testbroker_consumer_t *c);

const char *testbroker_msg_header(const testbroker_msg_t *m, const char *name);
void testbroker_msg_free(testbroker_msg_t *m);

/* A connection of its own that declares exchange (durable topic) and, when
 * queue is not NULL, a durable queue bound with binding_key; then closes.
 * For routes whose queue must appear later. Aborts on failure. */
void testbroker_declare(const char *exchange, const char *queue, const char *binding_key);

#endif
