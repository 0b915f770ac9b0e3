-- The outbox relay's functions (migrations/0012) in one session: claims in
-- outbox_id order with the identity, bounded; marking, refusing, deferring
-- (a deferred row holds back its identity's later rows, not other
-- identities); lag; the operators' backlog view and discard; purge of
-- published rows; outbox ids jumping with an epoch raise. Claims between
-- concurrent sessions are tests/race/race_outbox_claim.c.
-- The relay runs at READ COMMITTED (its functions refuse anything else).
BEGIN ISOLATION LEVEL READ COMMITTED;
\ir helpers/fixtures.psql
SELECT plan(33);

-- Identities and rows written as a fenced commit would (the table
-- fixtures write directly, as the superuser).
INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
                         workflow_name, operation_class, fencing_counter, created_at, state)
SELECT t.key(t.ident(x)), 'tenant-main', 'program-a', 'starintel-target', x, 'usernamegen',
       'default', 'default', 3, now(), 'free'
  FROM unnest(ARRAY['tx', 'ty', 'tz']) x;
CREATE FUNCTION t.put(target text, token bigint, n integer) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO lease.outbox (lock_key, topic, payload, fencing_token, lease_id, execution_id,
                              trace_id, created_at)
    VALUES (t.key(t.ident(target)), 'results.' || target, jsonb_build_object('n', n), token,
            'lease_' || target || token, 'exec-' || target, 'trace-' || n,
            now() - interval '2 seconds')
    RETURNING outbox_id $$;
SELECT t.put('tx', 1, 1) AS x1 \gset
SELECT t.put('ty', 1, 2) AS y1 \gset
SELECT t.put('tx', 2, 3) AS x2 \gset
SELECT t.put('tz', 1, 4) AS z1 \gset
SELECT t.put('ty', 2, 5) AS y2 \gset

-- claim ------------------------------------------------------------------
SET LOCAL ROLE lease_relay;
SELECT results_eq($$SELECT outbox_id FROM lease.outbox_claim(10)$$,
                  format('VALUES (%s::bigint), (%s), (%s), (%s), (%s)', :x1, :y1, :x2, :z1, :y2),
                  'a claim returns unpublished rows in outbox_id order');
SELECT is((SELECT row(lock_identity, topic, payload, fencing_token, lease_id, execution_id,
                      trace_id, attempts)::text
             FROM lease.outbox_claim(10) WHERE outbox_id = :x2),
          row(t.ident('tx'), 'results.tx', '{"n": 3}'::jsonb, 2::bigint, 'lease_tx2', 'exec-tx',
              'trace-3', 0)::text,
          'each row carries its identity, topic, payload, token, lease, execution, trace, attempts');
SELECT results_eq($$SELECT outbox_id FROM lease.outbox_claim(2)$$,
                  format('VALUES (%s::bigint), (%s)', :x1, :y1), 'batch_size bounds a claim');
SELECT throws_ok($$SELECT * FROM lease.outbox_claim(0)$$, '22023', NULL, 'batch_size 0 is refused');
SELECT throws_ok($$SELECT * FROM lease.outbox_claim(10001)$$, '22023', NULL,
                 'batch_size above 10000 is refused');
SELECT throws_ok($$SELECT * FROM lease.outbox_claim(NULL)$$, '22023', NULL,
                 'batch_size NULL is refused');

-- mark -------------------------------------------------------------------
SELECT is(lease.outbox_mark_published(ARRAY[:x1, :y1]::bigint[], 'relay-1'), 2,
          'mark_published answers how many rows it marked');
SELECT is(lease.outbox_mark_published(ARRAY[:x1]::bigint[], 'relay-2'), 0,
          'a row already published is left as it is');
SELECT throws_ok($$SELECT lease.outbox_mark_published(ARRAY[1]::bigint[], '')$$, '22023', NULL,
                 'an empty relay instance is refused');
RESET ROLE;
SELECT is((SELECT row(published_at IS NOT NULL, published_by, last_error)::text
             FROM lease.outbox WHERE outbox_id = :x1),
          row(true, 'relay-1', NULL::text)::text, 'published_at and published_by are set');
SET LOCAL ROLE lease_relay;
SELECT results_eq($$SELECT outbox_id FROM lease.outbox_claim(10)$$,
                  format('VALUES (%s::bigint), (%s), (%s)', :x2, :z1, :y2),
                  'published rows are not claimed again');

-- defer: the identity waits behind its row -------------------------------
SELECT is(lease.outbox_defer(:x2, 60000, 'returned by the broker: 312 NO_ROUTE'), 1,
          'defer answers 1 for an unpublished row');
RESET ROLE;
SELECT t.put('tx', 2, 6) AS x3 \gset
SELECT is((SELECT row(attempts, last_error, next_attempt_at > now())::text FROM lease.outbox
            WHERE outbox_id = :x2),
          row(1, 'returned by the broker: 312 NO_ROUTE', true)::text,
          'a deferred row counts the attempt, keeps the reason and waits');
SET LOCAL ROLE lease_relay;
SELECT results_eq($$SELECT outbox_id FROM lease.outbox_claim(10)$$,
                  format('VALUES (%s::bigint), (%s)', :z1, :y2),
                  'its identity''s later rows wait behind it; other identities do not');
SELECT is((SELECT deferred FROM lease.outbox_lag()), 1::bigint, 'the lag counts deferred rows');
RESET ROLE;
UPDATE lease.outbox SET next_attempt_at = now() - interval '1 ms' WHERE outbox_id = :x2;
SET LOCAL ROLE lease_relay;
SELECT results_eq($$SELECT outbox_id FROM lease.outbox_claim(10)$$,
                  format('VALUES (%s::bigint), (%s), (%s), (%s)', :x2, :z1, :y2, :x3),
                  'once its time has come the row and those behind it are claimed, in order');
SELECT throws_ok(format('SELECT lease.outbox_defer(%s, -1, %L)', :x2, 'x'), '22023', NULL,
                 'a negative delay is refused');
SELECT throws_ok(format('SELECT lease.outbox_defer(%s, 10, %L)', :x2, repeat('e', 513)), '22023',
                 NULL, 'a reason longer than 512 characters is refused');

-- refused (final) --------------------------------------------------------
SELECT is(lease.outbox_mark_refused(:z1, 'relay-1', 'stale: the document holds token 9'), 1,
          'mark_refused finishes a row the destination''s fence refused');
RESET ROLE;
SELECT is((SELECT row(published_at IS NOT NULL, last_error)::text FROM lease.outbox
            WHERE outbox_id = :z1),
          row(true, 'refused: stale: the document holds token 9')::text,
          'a refused row is finished and says why');

-- lag and the operators' view ---------------------------------------------
SET LOCAL ROLE lease_operator;
SELECT is((SELECT row(unpublished, deferred, lag_seconds >= 2)::text FROM lease.outbox_lag()),
          row(3::bigint, 0::bigint, true)::text,
          'outbox_lag: unpublished rows, deferred ones, age of the oldest');
SELECT is((SELECT array_agg(outbox_id ORDER BY outbox_id) FROM lease.outbox_backlog),
          ARRAY[:x2, :y2, :x3]::bigint[], 'operators see the backlog');
SELECT is((SELECT lock_identity FROM lease.outbox_backlog WHERE outbox_id = :y2), t.ident('ty'),
          'with each row''s identity');
SELECT throws_ok(format('SELECT lease.outbox_discard(%s, %L)', :y2, 'x'), '42501', NULL,
                 'operators cannot discard a row');
RESET ROLE;
SET LOCAL ROLE lease_relay;
SELECT throws_ok(format('SELECT lease.outbox_discard(%s, %L)', :y2, 'x'), '42501', NULL,
                 'the relay cannot discard a row');
RESET ROLE;
SET LOCAL ROLE lease_admin;
SELECT is(lease.outbox_discard(:y2, 'INC-7: consumer retired'), 1,
          'an administrator gives up on a row');
RESET ROLE;
SELECT is((SELECT row(published_at IS NOT NULL, last_error, published_by LIKE 'operator:%')::text
             FROM lease.outbox WHERE outbox_id = :y2),
          row(true, 'discarded: INC-7: consumer retired', true)::text,
          'a discarded row is finished, recorded as the operator''s');

-- purge --------------------------------------------------------------------
UPDATE lease.outbox SET published_at = now() - interval '2 days' WHERE outbox_id IN (:x1, :y1);
SET LOCAL ROLE lease_relay;
SELECT is(lease.outbox_purge(86400000, 100), 2, 'purge deletes published rows past retention');
SELECT is(lease.outbox_purge(0, 100), 2, 'with 0 ms, every published row');
SELECT throws_ok($$SELECT lease.outbox_purge(-1, 100)$$, '22023', NULL,
                 'a negative retention is refused');
RESET ROLE;
SELECT is((SELECT count(*) FROM lease.outbox WHERE published_at IS NULL), 2::bigint,
          'unpublished rows are never purged');

-- outbox ids jump with an epoch raise ---------------------------------------
SELECT max(outbox_id) AS before_epoch FROM lease.outbox \gset
UPDATE lease.namespace_state SET epoch = epoch + 1;
SELECT cmp_ok(t.put('tz', 3, 7), '>=', :before_epoch + 1099511627776,
              'after an epoch raise new outbox ids are 2^40 further on');
SELECT has_trigger('lease', 'namespace_state', 'outbox_ids_follow_epoch'::name,
                   'namespace_state has the trigger that moves outbox ids');

SELECT * FROM finish();
ROLLBACK;
