-- The typed calls take their predicate locks where the hashed lock key puts
-- them (docs/architecture.md, "SERIALIZABLE layout"): through the primary
-- key, never through the unique index on the identity tuple, where
-- neighbouring identities (target_01, target_02, ...) share leaf pages, nor
-- on the whole table. A plan through that index made 8 clients on disjoint
-- identities fail each other (tests/bench/run's disjoint case: 156 retried,
-- 95 failed where none had). Enough rows, analysed, that the planner
-- chooses as it would in production.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(6);

INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
                         workflow_name, operation_class, fencing_counter, created_at, state)
SELECT t.key(t.ident('pl_' || g)), 'tenant-main', 'program-a', 'starintel-target', 'pl_' || g,
       'usernamegen', 'default', 'default', 0, now(), 'free'
  FROM generate_series(1, 5000) g;
ANALYZE lease.locks;

-- the SIREAD locks this transaction holds on lease.locks and its indexes
CREATE FUNCTION t.siread(rel regclass) RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT count(*) FROM pg_locks
         WHERE pid = pg_backend_pid() AND mode = 'SIReadLock' AND relation = rel);
CREATE FUNCTION t.siread_table() RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT count(*) FROM pg_locks
         WHERE pid = pg_backend_pid() AND mode = 'SIReadLock'
           AND relation = 'lease.locks'::regclass AND locktype = 'relation');

SET LOCAL ROLE lease_service;
SELECT t.acquire_typed(t.acq('pl_17')) AS a \gset
RESET ROLE;
SELECT is(:'a'::jsonb ->> 'code', 'lease_acquired', 'acquired (an existing free identity)');
SELECT is(t.siread('lease.locks_identity'), 0::bigint, 'acquire: no predicate lock on the identity index');
SET LOCAL ROLE lease_service;
SELECT t.renew_typed(t.ref(t.acquire('pl_18'))) ->> 'code' AS r \gset
RESET ROLE;
SELECT is(:'r'::text, 'lease_renewed', 'renewed');
SET LOCAL ROLE lease_service;
SELECT t.release_typed(t.ref(t.acquire('pl_19'))) ->> 'code' AS l \gset
RESET ROLE;
SELECT is(:'l'::text, 'lease_released', 'released');
SELECT is(t.siread('lease.locks_identity'), 0::bigint,
          'acquire, renew, release: no predicate lock on the identity index');
SELECT is(t.siread_table(), 0::bigint, 'nor on the whole table');

SELECT * FROM finish();
ROLLBACK;
