-- The housekeeping steps refuse any isolation but READ COMMITTED (their
-- guarantee that they never take part in a serialization failure rests on
-- taking no predicate locks), and change nothing when they refuse.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(5);

SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01') AS a1 \gset
RESET ROLE;
SELECT t.expire(:'a1'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT throws_ok($$SELECT lease.expire_due(10, 0)$$, 'LS020',
                 'housekeeping steps run at READ COMMITTED, not serializable',
                 'expire_due refuses SERIALIZABLE');
SELECT throws_ok($$SELECT lease.purge_due(10)$$, 'LS020',
                 'housekeeping steps run at READ COMMITTED, not serializable',
                 'purge_due refuses SERIALIZABLE');
RESET ROLE;
SELECT is((t.row_of(t.ident('target_01'))).state, 'active', 'the expired lease is still in its row');
SELECT is((SELECT count(*)::int FROM lease.history), 0, 'and not in history');
SELECT is((SELECT count(*)::int FROM lease.idempotency), 1, 'the idempotency row is untouched');

SELECT * FROM finish();
ROLLBACK;
