-- 0024: housekeeping in separate, bounded steps at READ COMMITTED.
--
-- leased used to call lease.check_namespace, lease.sweep_expired and
-- lease.purge_retention in one SERIALIZABLE statement. sweep_expired's
-- search for expired leases reads lease.locks by sequential scan, which
-- takes a predicate lock on the whole table, so every acquisition, renewal
-- and release that wrote a lease row concurrently was a read-write conflict
-- with it; PostgreSQL's log named the sweep "conflict out to pivot", and
-- under steady load it starved (issue 40). Since this version leased calls:
--   lease.check_namespace  SERIALIZABLE, on its own (a decision like any other)
--   lease.expire_due       READ COMMITTED, batches of expired leases
--   lease.purge_due        READ COMMITTED, batches of rows past retention
-- repeated while a batch comes back full (src/server/sweeper.c). Why READ
-- COMMITTED is safe: docs/architecture.md, "Readiness and background work".
--
-- The functions are definitions of sql/ (applied with this file), and the
-- version is what leased's readiness gate checks, so a database at 24 has
-- the functions a build expecting 24 calls (docs/schema.md, "When leased
-- starts calling a function"). lease.sweep_expired and
-- lease.purge_retention stay for operators and older builds.
--
-- The purges take the oldest rows first, a batch at a time. The BRIN
-- indexes of 0009 on the retention columns serve that only while the
-- table's physical order is its time order, which the purge itself ends:
-- vacuum hands the space of purged rows to new ones, every block range
-- then spans old and new times, and finding the oldest batch meant reading
-- and sorting every row past retention (measured: 105 ms for 501 of 100,000
-- rows past retention, against 0.5 ms by B-tree); a purge that falls behind
-- then gets slower, and in the soak (tests/bench/soak) it ran past its
-- deadline. B-trees on the three retention columns that have no ordered
-- index (22.6 bytes a row on the idempotency table, measured); the audit
-- purge walks the audit table's primary key (event ids follow time), so
-- its BRIN stays for operators' time-range queries.
--
-- Building the indexes holds a SHARE lock on each table (writes wait) for
-- as long as the build takes: on a large database, create them first with
-- CREATE INDEX CONCURRENTLY under these names (then the statements below
-- find them) and drop the BRIN ones the same way.
DO $$
DECLARE
    ix record;
BEGIN
    FOR ix IN SELECT * FROM (VALUES ('idempotency_expires_at', 'idempotency', 'expires_at'),
                                    ('history_ended_at', 'history', 'ended_at'),
                                    ('lease_index_created_at', 'lease_index', 'created_at'))
                           AS v(name, tbl, col) LOOP
        IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_am a ON a.oid = c.relam
                    WHERE c.oid = to_regclass('lease.' || ix.name) AND a.amname = 'brin') THEN
            EXECUTE format('DROP INDEX lease.%I', ix.name);
        END IF;
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON lease.%I (%I)', ix.name, ix.tbl, ix.col);
    END LOOP;
END
$$;
