/*
 * pgprivate.h - a PostgreSQL cluster or a PgBouncer of a test's own
 * (tests/harness/pgprivate does the work), for deployment tests the shared
 * throwaway cluster cannot host: TLS over TCP, roles made from scratch by a
 * non-superuser, a pooler in transaction mode in front.
 *
 *   pg_private_t *pg = pg_private_start(NULL);          // or with TLS files
 *   char *url = pg_private_url(pg, "postgres", "postgres");  // socket, superuser
 *   ...
 *   pg_private_stop(pg);
 *
 * Every function aborts the test (exit 1, logs printed) on failure. Both
 * need binaries on this machine (initdb, pgbouncer) and a cluster the tests
 * own: with LEASE_TEST_DATABASE_URL set they are unavailable
 * (pg_private_available() says so; callers exit 77, "skipped").
 */
#ifndef LEASE_TEST_PGPRIVATE_H
#define LEASE_TEST_PGPRIVATE_H

#include <stdbool.h>

typedef struct pg_private {
    char dir[128];     /* data, socket, log */
    int port;          /* 127.0.0.1 TCP port */
} pg_private_t;

typedef struct pg_private_opts {
    const char *ssl_dir; /* NULL, or a folder with server.crt and server.key: TCP is TLS only */
} pg_private_opts_t;

/* Whether private clusters and PgBouncer can run here. */
bool pg_private_available(void);

pg_private_t *pg_private_start(const pg_private_opts_t *opts);
/* postgresql:///db?host=DIR&port=PORT&user=user (Unix socket; heap). */
char *pg_private_url(const pg_private_t *pg, const char *db, const char *user);
/* Stops the cluster and removes its folder; accepts NULL. */
void pg_private_stop(pg_private_t *pg);
/* Prints the tail of the cluster's log to stderr. */
void pg_private_dump_log(const pg_private_t *pg);

typedef struct pg_bouncer {
    char dir[128];
    int port;
} pg_bouncer_t;

/*
 * PgBouncer on 127.0.0.1 in front of the cluster whose socket is
 * upstream_sockdir/upstream_port, any database; pool_mode "transaction",
 * "session" or "statement"; pool_size server connections per (database,
 * user); users: NULL-terminated names it accepts (no password).
 */
pg_bouncer_t *pg_bouncer_start(const char *upstream_sockdir, int upstream_port,
                               const char *pool_mode, int pool_size, const char *const *users);
/* postgresql://user@127.0.0.1:PORT/db[?application_name=app] (heap). */
char *pg_bouncer_url(const pg_bouncer_t *b, const char *db, const char *user, const char *app);
void pg_bouncer_stop(pg_bouncer_t *b);
void pg_bouncer_dump_log(const pg_bouncer_t *b);

#endif
