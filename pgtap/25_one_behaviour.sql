-- One behaviour for every caller (docs/sql-api.md): acquire, renew and
-- release decide the same way whatever flags the request carries. A call as
-- an operator makes it (no flags) reads nothing of lease.idempotency before
-- its write (no predicate lock that would tie it to transactions on other
-- identities), and a repeated request gets its stored answer with or
-- without the flags the service once sent ("optimistic", "existing"), never
-- an exception.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(16);

-- Predicate locks this transaction holds on lease.idempotency or its indexes.
CREATE FUNCTION t.idem_sireads() RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT count(*) FROM pg_locks
         WHERE pid = pg_backend_pid() AND mode = 'SIReadLock'
           AND relation IN (SELECT 'lease.idempotency'::regclass
                            UNION ALL SELECT indexrelid FROM pg_index
                                       WHERE indrelid = 'lease.idempotency'::regclass));

-- A call's answer, or the SQLSTATE and constraint it raised.
CREATE FUNCTION t.call(f text, r jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    o jsonb;
    cn text;
BEGIN
    EXECUTE format('SELECT lease.%I($1)', f) INTO o USING r;
    RETURN o;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
    RETURN jsonb_build_object('sqlstate', SQLSTATE, 'constraint', cn);
END
$$;

-- The plain calls read no idempotency key before writing ----------------------------------
SET LOCAL ROLE lease_service;
SELECT t.call('acquire', t.acq('plain_01')) AS p1 \gset
RESET ROLE;
SELECT is(:'p1'::jsonb ->> 'code', 'lease_acquired', 'a plain acquire of a new identity');
SELECT is(t.idem_sireads(), 0::bigint,
          'took no predicate lock on lease.idempotency (the request id was not looked up first)');
SET LOCAL ROLE lease_service;
SELECT t.call('renew', t.ref(:'p1'::jsonb)) AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb ->> 'code', 'lease_renewed', 'a plain renewal');
SELECT is(t.idem_sireads(), 0::bigint, 'took none either');
SET LOCAL ROLE lease_service;
SELECT t.call('release', t.ref(:'p1'::jsonb)) AS l1 \gset
RESET ROLE;
SELECT is(:'l1'::jsonb ->> 'code', 'lease_released', 'a plain release');
SELECT is(t.idem_sireads(), 0::bigint, 'took none either');

-- A repeat after the lease ended: the stored answer, whatever the flags ----------------------
SET LOCAL ROLE lease_service;
SELECT t.acq('plain_02') AS aq \gset
SELECT t.call('acquire', :'aq'::jsonb) AS a2 \gset
SELECT t.call('release', t.ref(:'a2'::jsonb)) AS l2 \gset
SELECT t.call('acquire', :'aq'::jsonb) AS a2r \gset
SELECT t.call('acquire', :'aq'::jsonb || '{"optimistic": true}') AS a2o \gset
SELECT t.call('acquire', :'aq'::jsonb || '{"optimistic": true, "existing": true}') AS a2oe \gset
RESET ROLE;
SELECT is(:'l2'::jsonb ->> 'code', 'lease_released', 'acquired and released');
SELECT is(ARRAY[:'a2r'::jsonb ->> 'replayed', :'a2r'::jsonb #>> '{lease,lease_id}'],
          ARRAY['true', :'a2'::jsonb #>> '{lease,lease_id}'], 'plain repeat: the stored answer');
SELECT is(:'a2o'::jsonb, :'a2r'::jsonb, '"optimistic": the same answer, not an exception');
SELECT is(:'a2oe'::jsonb, :'a2r'::jsonb, '"optimistic" and "existing": the same answer');
SELECT is(ARRAY[(t.row_of(t.ident('plain_02'))).state, t.counter(t.ident('plain_02'))::text],
          ARRAY['free', '1'], 'no repeat reacquired the row or allocated a token');

-- A repeated renewal of a lease still held: the stored answer, whatever the flags ------------
SET LOCAL ROLE lease_service;
SELECT t.call('acquire', t.acq('plain_03', '{"existing": true}')) AS a3 \gset
SELECT t.ref(:'a3'::jsonb) AS rq \gset
SELECT t.call('renew', :'rq'::jsonb) AS r3 \gset
SELECT t.call('renew', :'rq'::jsonb) AS r3r \gset
SELECT t.call('renew', :'rq'::jsonb || '{"optimistic": true}') AS r3o \gset
SELECT t.call('renew', :'rq'::jsonb || jsonb_build_object('request_digest', t.digest(),
                                                          'optimistic', true)) AS r3d \gset
RESET ROLE;
SELECT is(:'a3'::jsonb ->> 'code', 'lease_acquired',
          '"existing" on a new identity: acquired all the same');
SELECT is(ARRAY[:'r3'::jsonb ->> 'code', :'r3r'::jsonb ->> 'replayed'], ARRAY['lease_renewed', 'true'],
          'plain repeated renewal: the stored answer');
SELECT is(:'r3o'::jsonb, :'r3r'::jsonb, '"optimistic" repeated renewal: the same answer');
SELECT is(:'r3d'::jsonb, '{"code":"idempotency_conflict"}'::jsonb,
          'the same request id with another digest: idempotency_conflict, not an exception');
SELECT is(t.idem_count(:'rq'::jsonb ->> 'request_id'), 1::bigint, 'one idempotency row for the renewal');

SELECT * FROM finish();
ROLLBACK;
