-- Idempotency by request id: a retry of acquire, renew, release,
-- force_release, revoke or fenced_commit with the same digest returns the
-- original result (replayed, with the lease's current state) and never
-- renews, reacquires, releases a successor or allocates again; another
-- digest answers idempotency_conflict and changes nothing.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(49);

CREATE FUNCTION t.strip(r jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE
RETURN r - 'replayed' - 'current_state';

-- acquire ---------------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acq() AS aq \gset
SELECT lease.acquire(:'aq'::jsonb) AS a1 \gset
SELECT lease.acquire(:'aq'::jsonb) AS a1r \gset
RESET ROLE;
SELECT is(t.strip(:'a1r'::jsonb), t.strip(:'a1'::jsonb), 'acquire retry: the original result');
SELECT is(ARRAY[:'a1r'::jsonb #>> '{lease,lease_id}', :'a1r'::jsonb #>> '{lease,fencing_token}'],
          ARRAY[:'a1'::jsonb #>> '{lease,lease_id}', :'a1'::jsonb #>> '{lease,fencing_token}'],
          'the same lease id and token');
SELECT is(ARRAY[:'a1r'::jsonb ->> 'replayed', :'a1r'::jsonb ->> 'current_state'], ARRAY['true', 'active'],
          'marked replayed, current state active');
SELECT is(t.counter(t.ident()), 1::bigint, 'no second token was allocated');
SELECT is(t.idem_count(:'aq'::jsonb ->> 'request_id'), 1::bigint, 'one idempotency row');
SELECT is(t.audit_count(:'aq'::jsonb ->> 'request_id'), 1::bigint, 'one audit event (the replay writes none)');

SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.acquire(:'aq'::jsonb || jsonb_build_object('request_digest', t.digest())),
          '{"code":"idempotency_conflict"}'::jsonb, 'acquire: same request id, other digest: idempotency_conflict');
SELECT is(lease.acquire(:'aq'::jsonb || jsonb_build_object('request_digest', t.digest(), 'ttl_ms', 60000)) ->> 'code',
          'idempotency_conflict', 'even when the body changed too');
SELECT is(lease.acquire(:'aq'::jsonb || jsonb_build_object('principal', t.principal('p2'))) ->> 'code',
          'lease_conflict', 'the key is scoped by principal: another owner''s same request id is a new request');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'none of these changed anything');

-- acquire replayed after expiry and after release: original result + terminal state ------
SELECT t.expire(:'a1'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.acquire(:'aq'::jsonb) ->> 'current_state', 'expired', 'replay after expiry: current_state expired');
SELECT is(lease.acquire(:'aq'::jsonb) #>> '{lease,lease_id}', :'a1'::jsonb #>> '{lease,lease_id}',
          'and still the original lease, not a reacquisition');
RESET ROLE;
SELECT is((t.row_of(t.ident())).lease_id, :'a1'::jsonb #>> '{lease,lease_id}', 'the row was not reacquired');
SELECT is(t.counter(t.ident()), 1::bigint, 'counter still 1');

SET LOCAL ROLE lease_service;
SELECT t.acq('target_02') AS bq \gset
SELECT lease.acquire(:'bq'::jsonb) AS b1 \gset
SELECT is(lease.release(t.ref(:'b1'::jsonb)) ->> 'code', 'lease_released', 'release lease b');
SELECT lease.acquire(:'bq'::jsonb) AS b1r \gset
RESET ROLE;
SELECT is(t.strip(:'b1r'::jsonb), t.strip(:'b1'::jsonb), 'replay after release: the original result');
SELECT is(ARRAY[:'b1r'::jsonb ->> 'replayed', :'b1r'::jsonb ->> 'current_state'], ARRAY['true', 'released'],
          'with current_state released');
SELECT is((t.row_of(t.ident('target_02'))).state, 'free', 'the replay did not reacquire');
SELECT is(t.counter(t.ident('target_02')), 1::bigint, 'nor allocate a token');

-- renew -----------------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_03') AS c1 \gset
RESET ROLE;
SELECT t.age(:'c1'::jsonb #>> '{lease,lease_id}', '10 seconds') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT t.ref(:'c1'::jsonb) AS rq \gset
SELECT lease.renew(:'rq'::jsonb) AS r1 \gset
RESET ROLE;
SELECT t.age(:'c1'::jsonb #>> '{lease,lease_id}', '5 seconds') AS aged_expiry \gset
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT lease.renew(:'rq'::jsonb) AS r1r \gset
RESET ROLE;
SELECT is(t.strip(:'r1r'::jsonb), t.strip(:'r1'::jsonb), 'renew retry: the original result');
SELECT is(:'r1r'::jsonb ->> 'replayed', 'true', 'marked replayed');
SELECT is(t.snapshot(), :'before', 'the retry did not renew again');
SELECT is((t.lock_of(:'c1'::jsonb #>> '{lease,lease_id}')).expires_at, :'aged_expiry'::timestamptz,
          'expires_at is where the fixture left it');
SET LOCAL ROLE lease_service;
SELECT is(lease.renew(:'rq'::jsonb || jsonb_build_object('request_digest', t.digest())),
          '{"code":"idempotency_conflict"}'::jsonb, 'renew: other digest: idempotency_conflict');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'and no mutation');

-- release: the replay never releases a successor ----------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.ref(:'c1'::jsonb) AS lq \gset
SELECT lease.release(:'lq'::jsonb) AS l1 \gset
SELECT t.acquire('target_03') AS c2 \gset
SELECT lease.release(:'lq'::jsonb) AS l1r \gset
RESET ROLE;
SELECT is(t.strip(:'l1r'::jsonb), t.strip(:'l1'::jsonb), 'release retry: the original result');
SELECT is(ARRAY[:'l1r'::jsonb ->> 'replayed', :'l1r'::jsonb ->> 'current_state'], ARRAY['true', 'released'],
          'marked replayed, current state released');
SELECT is((SELECT lease_id FROM lease.active_leases WHERE lock_key = t.key(t.ident('target_03'))),
          :'c2'::jsonb #>> '{lease,lease_id}', 'the successor is still active');
SET LOCAL ROLE lease_service;
SELECT is(lease.release(:'lq'::jsonb || jsonb_build_object('request_digest', t.digest())),
          '{"code":"idempotency_conflict"}'::jsonb, 'release: other digest: idempotency_conflict');
RESET ROLE;

-- force_release and revoke ----------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.admin(:'c2'::jsonb) AS fq \gset
SELECT lease.force_release(:'fq'::jsonb) AS f1 \gset
SELECT t.acquire('target_03') AS c3 \gset
SELECT lease.force_release(:'fq'::jsonb) AS f1r \gset
SELECT t.admin(:'c3'::jsonb, 'compromised', '{"incident_id": "INC-5"}') AS vq \gset
SELECT lease.revoke(:'vq'::jsonb) AS v1 \gset
SELECT t.acquire('target_03') AS c4 \gset
SELECT lease.revoke(:'vq'::jsonb) AS v1r \gset
RESET ROLE;
SELECT is(t.strip(:'f1r'::jsonb), t.strip(:'f1'::jsonb), 'force_release retry: the original result');
SELECT is(:'f1r'::jsonb ->> 'replayed', 'true', 'marked replayed');
SELECT is(t.strip(:'v1r'::jsonb), t.strip(:'v1'::jsonb), 'revoke retry: the original result');
SELECT is(ARRAY[:'v1r'::jsonb ->> 'replayed', :'v1r'::jsonb ->> 'current_state'], ARRAY['true', 'revoked'],
          'marked replayed, current state revoked');
SELECT is((SELECT lease_id FROM lease.active_leases WHERE lock_key = t.key(t.ident('target_03'))),
          :'c4'::jsonb #>> '{lease,lease_id}', 'neither retry touched the successor');
SELECT is((SELECT count(*)::int FROM lease.audit_events
            WHERE request_id IN (:'fq'::jsonb ->> 'request_id', :'vq'::jsonb ->> 'request_id')), 2,
          'one audit event per administrative request');
SET LOCAL ROLE lease_service;
SELECT is(lease.force_release(:'fq'::jsonb || jsonb_build_object('request_digest', t.digest())) ->> 'code',
          'idempotency_conflict', 'force_release: other digest: idempotency_conflict');
SELECT is(lease.revoke(:'vq'::jsonb || jsonb_build_object('request_digest', t.digest())) ->> 'code',
          'idempotency_conflict', 'revoke: other digest: idempotency_conflict');
RESET ROLE;

-- fenced_commit -----------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.commit_req(:'c4'::jsonb, jsonb_build_array(t.doc('result/1', 0), t.pub('results.ready'))) AS cq \gset
SELECT lease.fenced_commit(:'cq'::jsonb) AS k1 \gset
SELECT lease.fenced_commit(:'cq'::jsonb) AS k1r \gset
RESET ROLE;
SELECT is(:'k1'::jsonb ->> 'code', 'commit_accepted', 'the commit is accepted');
SELECT is(t.strip(:'k1r'::jsonb), t.strip(:'k1'::jsonb), 'commit retry: the original result');
SELECT is(:'k1r'::jsonb ->> 'replayed', 'true', 'marked replayed');
SELECT is((SELECT revision FROM lease.fenced_documents WHERE document_key = 'result/1'), 1::bigint,
          'the document was written once (revision 1)');
SELECT is((SELECT count(*)::int FROM lease.outbox WHERE topic = 'results.ready'), 1,
          'one outbox row');
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.fenced_commit(:'cq'::jsonb || jsonb_build_object('request_digest', t.digest())),
          '{"code":"idempotency_conflict"}'::jsonb, 'commit: other digest: idempotency_conflict');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'and nothing written');

-- replays after the row passed to another lease: the answers are rebuilt
-- from each request's audit event and the ended lease's history row
-- (lease._replay_answer), the whole record and the brief one alike
SELECT t.acq('target_h1') AS hq \gset
SELECT lease.acquire(:'hq'::jsonb) AS h1 \gset
SELECT t.ref(:'h1'::jsonb, '{"ttl_ms": 20000}') AS hrq \gset
SELECT lease.renew(:'hrq'::jsonb) AS hr1 \gset
SELECT t.ref(:'h1'::jsonb) AS hlq \gset
SELECT lease.release(:'hlq'::jsonb) AS hl1 \gset
SELECT lease.acquire(t.acq('target_h1')) AS hnext \gset
SELECT is(t.strip(lease.acquire(:'hq'::jsonb)), t.strip(:'h1'::jsonb),
          'acquire replayed from history: the original result');
SELECT is(t.strip(lease.renew(:'hrq'::jsonb)), t.strip(:'hr1'::jsonb),
          'renew (its own TTL) replayed from history: the original result');
SELECT is(t.strip(lease.release(:'hlq'::jsonb)), t.strip(:'hl1'::jsonb),
          'release replayed: the original result');
SELECT is(lease.renew(:'hrq'::jsonb) ->> 'current_state', 'released',
          'and the current state is the history row''s');
SELECT isnt(:'hnext'::jsonb #>> '{lease,lease_id}', :'h1'::jsonb #>> '{lease,lease_id}',
            'the row holds another lease meanwhile');

SELECT * FROM finish();
ROLLBACK;
