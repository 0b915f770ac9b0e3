-- Migration 0013: which ended leases NOTIFY lease_ended (every end the
-- holder did not ask for itself, never an ordinary release), and
-- lease.watch_ended, the watch hub's batched poll.
--
-- A NOTIFY is only delivered at commit and this file rolls back, so the
-- trigger's function is swapped (inside this transaction) for one that
-- records what it would have sent; the WHEN clause under test is the real
-- one. tests/http/http_watch.c sees the real notifications arrive.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(19);

SELECT has_trigger('lease', 'history', 'history_notify_ended'::name,
                   'history has the lease-ended notification trigger');
SELECT is((SELECT tgtype & 1 = 1 AND tgtype & 2 = 0 AND tgtype & 4 = 4 FROM pg_trigger
            WHERE tgname = 'history_notify_ended'), true,
          'it fires after insert, per row');

CREATE TABLE t.notified (lease_id text, state text);
GRANT ALL ON t.notified TO PUBLIC;
CREATE OR REPLACE FUNCTION lease._notify_lease_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO t.notified VALUES (NEW.lease_id, NEW.state);
    RETURN NULL;
END
$$;

SET LOCAL ROLE lease_service;
SELECT t.acquire('n_release') AS released \gset
SELECT t.acquire('n_force') AS forced \gset
SELECT t.acquire('n_revoke') AS revoked \gset
SELECT t.acquire('n_sweep') AS swept \gset
SELECT t.acquire('n_taken') AS taken \gset
SELECT t.acquire('n_active') AS active \gset
SELECT is(lease.release(t.ref(:'released'::jsonb)) ->> 'code', 'lease_released', 'released by its holder');
SELECT is(lease.force_release(t.admin(:'forced'::jsonb)) ->> 'code', 'lease_released', 'force-released');
SELECT is(lease.revoke(t.admin(:'revoked'::jsonb)) ->> 'code', 'lease_revoked', 'revoked');
RESET ROLE;
SELECT t.expire(:'swept'::jsonb #>> '{lease,lease_id}') IS NOT NULL AS x \gset
SELECT t.expire(:'taken'::jsonb #>> '{lease,lease_id}') IS NOT NULL AS x \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.sweep_expired(1000) ->> 'expired', '2', 'the sweep ends the two expired leases');
RESET ROLE;

SELECT is((SELECT count(*)::int FROM t.notified WHERE lease_id = :'released'::jsonb #>> '{lease,lease_id}'),
          0, 'an ordinary release notifies nobody (the poll finds it)');
SELECT is((SELECT state FROM t.notified WHERE lease_id = :'forced'::jsonb #>> '{lease,lease_id}'),
          'released', 'a force-release notifies');
SELECT is((SELECT state FROM t.notified WHERE lease_id = :'revoked'::jsonb #>> '{lease,lease_id}'),
          'revoked', 'a revoke notifies');
SELECT is((SELECT state FROM t.notified WHERE lease_id = :'swept'::jsonb #>> '{lease,lease_id}'),
          'expired', 'an expiry ended by the sweep notifies');
SELECT is((SELECT count(*)::int FROM t.notified WHERE lease_id = :'active'::jsonb #>> '{lease,lease_id}'),
          0, 'a lease that is still active notifies nobody');

-- an acquisition over an expired lease ends it: that notifies too
SET LOCAL ROLE lease_service;
SELECT t.acquire('n_over') AS over \gset
RESET ROLE;
SELECT t.expire(:'over'::jsonb #>> '{lease,lease_id}') IS NOT NULL AS x \gset
SET LOCAL ROLE lease_service;
SELECT is(t.acquire('n_over') ->> 'code', 'lease_acquired', 'a new lease over the expired one');
RESET ROLE;
SELECT is((SELECT state FROM t.notified WHERE lease_id = :'over'::jsonb #>> '{lease,lease_id}'),
          'expired', 'the expired lease it replaced notifies');

-- recovery revokes every live lease: each notifies
SELECT lease.recover_epoch('pgtap: push on recovery') IS NOT NULL AS x \gset
SELECT is((SELECT state FROM t.notified WHERE lease_id = :'active'::jsonb #>> '{lease,lease_id}'),
          'revoked', 'epoch recovery revokes and notifies');

-- watch_ended ----------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire('w_active') AS live \gset
SELECT t.acquire('w_expired') AS lapsed \gset
RESET ROLE;
SELECT t.expire(:'lapsed'::jsonb #>> '{lease,lease_id}') IS NOT NULL AS x \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.watch_ended(ARRAY[:'live'::jsonb #>> '{lease,lease_id}']), '[]'::jsonb,
          'an active lease has not ended');
SELECT is(lease.watch_ended(ARRAY[:'lapsed'::jsonb #>> '{lease,lease_id}']),
          jsonb_build_array(:'lapsed'::jsonb #>> '{lease,lease_id}'),
          'a lease past expires_at has ended, swept or not');
SELECT is(lease.watch_ended(ARRAY[:'released'::jsonb #>> '{lease,lease_id}',
                                  :'live'::jsonb #>> '{lease,lease_id}',
                                  :'released'::jsonb #>> '{lease,lease_id}',
                                  'lease_never_existed']),
          (SELECT jsonb_agg(x ORDER BY x)
             FROM unnest(ARRAY[:'released'::jsonb #>> '{lease,lease_id}', 'lease_never_existed']) x),
          'released and unknown ids are reported once each; the active one is not');
SELECT is(lease.watch_ended(ARRAY[]::text[]), '[]'::jsonb, 'no ids, nothing ended');
SELECT throws_ok($$SELECT lease.watch_ended(NULL)$$, '22023', NULL, 'NULL is refused');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
