-- acquire-if-free: the transition table rows for acquire, TTL and lifetime
-- bounds, deadlines, millisecond times, metadata, the sealed namespace and
-- the token limit.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(84);

-- no record -> active --------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acq() AS q1 \gset
SELECT lease.acquire(:'q1'::jsonb) AS a1 \gset
RESET ROLE;

SELECT is(:'a1'::jsonb ->> 'code', 'lease_acquired', 'first acquire: lease_acquired');
SELECT is((:'a1'::jsonb #>> '{lease,fencing_token}')::bigint, 1::bigint, 'first token is 1');
SELECT is(t.counter(t.ident()), 1::bigint, 'the durable counter was incremented to 1');
SELECT matches(:'a1'::jsonb #>> '{lease,lease_id}', '^lease_[0-9a-f]{32}$', 'an opaque lease id');
SELECT is(:'a1'::jsonb #>> '{lease,state}', 'active', 'state active');
SELECT is(:'a1'::jsonb #> '{lease,lock_identity}', t.ident(), 'the canonical identity is returned');
SELECT is((:'a1'::jsonb #>> '{lease,ttl_ms}')::bigint, 30000::bigint, 'default TTL 30000 ms');
SELECT is((:'a1'::jsonb #>> '{lease,maximum_lifetime_ms}')::bigint, 3600000::bigint,
          'policy maximum lifetime');
SELECT is((t.row_of(t.ident())).acquired_at, date_trunc('milliseconds', now()),
          'acquired_at is backend time truncated to milliseconds');
SELECT is((t.row_of(t.ident())).renewed_at, (t.row_of(t.ident())).acquired_at,
          'renewed_at initially equals acquired_at');
SELECT is((t.row_of(t.ident())).expires_at,
          date_trunc('milliseconds', now()) + interval '30 seconds', 'expires_at = acquired_at + ttl');
SELECT is((:'a1'::jsonb #>> '{lease,acquired_at}')::timestamptz, (t.row_of(t.ident())).acquired_at,
          'the wire acquired_at equals the stored value');
SELECT is((:'a1'::jsonb #>> '{lease,expires_at}')::timestamptz, (t.row_of(t.ident())).expires_at,
          'the wire expires_at equals the stored value');
SELECT matches(:'a1'::jsonb #>> '{lease,expires_at}',
               '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$', 'RFC 3339 UTC with three digits');
SELECT is(ARRAY[:'a1'::jsonb #>> '{lease,owner_principal_id}', :'a1'::jsonb #>> '{lease,owner_client_id}',
                :'a1'::jsonb #>> '{lease,owner_credential_id}', :'a1'::jsonb #>> '{lease,service_instance_id}',
                :'a1'::jsonb #>> '{lease,execution_id}', :'a1'::jsonb #>> '{lease,job_id}',
                :'a1'::jsonb #>> '{lease,trace_id}'],
          ARRAY['p1', 'client-p1', 'cred-p1', 'inst-1', 'exec-1', 'job-1', 'trace-1'],
          'owner, instance, execution, job and trace are recorded');
SELECT is((SELECT result ->> 'code' FROM lease.idempotency
            WHERE request_id = :'q1'::jsonb ->> 'request_id' AND operation = 'acquire'
              AND lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          'lease_acquired', 'the idempotency result is stored with the mutation');
SELECT is(ARRAY[:'a1'::jsonb ->> 'replayed', :'a1'::jsonb ->> 'current_state'], ARRAY['false', 'active'],
          'a first attempt is not a replay');

-- active -> conflict: nothing changes --------------------------------------
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01', jsonb_build_object('principal', t.principal('p2'))) AS c1 \gset
RESET ROLE;
SELECT is(:'c1'::jsonb ->> 'code', 'lease_conflict', 'another owner gets lease_conflict');
SELECT is((:'c1'::jsonb ->> 'retry_after_ms')::int, 1000, 'retry hint capped at 1000 ms');
SELECT ok(NOT :'c1'::jsonb ? 'lease', 'a conflict discloses no lease');
SELECT is(t.snapshot(), :'before', 'a conflict changes neither lease nor counter (nor anything else)');
SELECT lives_ok(format('SELECT t.age(%L, %L)', :'a1'::jsonb #>> '{lease,lease_id}', '29900 ms'),
                'fixture: the holder expires in 100 ms');
SET LOCAL ROLE lease_service;
SELECT is((t.acquire('target_01', jsonb_build_object('principal', t.principal('p2'))) ->> 'retry_after_ms')::int,
          100, 'retry hint is the time left on the holder');
RESET ROLE;

-- expired (unswept) -> active: strictly greater token, new lease id ------------
SELECT t.expire(:'a1'::jsonb #>> '{lease,lease_id}') AS old_expiry \gset
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01', jsonb_build_object('principal', t.principal('p2'))) AS a2 \gset
RESET ROLE;
SELECT is(:'a2'::jsonb ->> 'code', 'lease_acquired', 'an expired holder does not block acquisition');
SELECT cmp_ok((:'a2'::jsonb #>> '{lease,fencing_token}')::bigint, '>',
              (:'a1'::jsonb #>> '{lease,fencing_token}')::bigint, 'strictly greater token');
SELECT isnt(:'a2'::jsonb #>> '{lease,lease_id}', :'a1'::jsonb #>> '{lease,lease_id}', 'a new lease id');
SELECT is(t.counter(t.ident()), 2::bigint, 'counter 2');
SELECT is((SELECT ARRAY[state, fencing_token::text, owner_principal_id] FROM lease.history
            WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          ARRAY['expired', '1', 'p1'], 'the expired lease is recorded in history');
SELECT is((SELECT ended_at FROM lease.history WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          :'old_expiry'::timestamptz, 'expired evidence ends at the old expires_at');
SELECT is((SELECT previous_state FROM lease.audit_events
            WHERE lease_id = :'a2'::jsonb #>> '{lease,lease_id}'), 'expired',
          'the audit event records the previous state expired');

-- released -> active ------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.release(t.ref(:'a2'::jsonb)) ->> 'code', 'lease_released', 'release the second lease');
SELECT t.acquire() AS a3 \gset
RESET ROLE;
SELECT is((:'a3'::jsonb #>> '{lease,fencing_token}')::bigint, 3::bigint,
          'after release: token 3, counter kept across release');
SELECT is(t.counter(t.ident()), 3::bigint, 'counter 3');
SELECT is((SELECT count(DISTINCT lease_id)::int FROM lease.history WHERE lock_key = t.key(t.ident())), 2,
          'two terminal leases in history');

-- TTL bounds: minimum exclusive, maximum inclusive --------------------------------
SET LOCAL ROLE lease_service;
SELECT is(t.acquire('ttl-1', '{"ttl_ms": 1000}'),
          '{"code":"invalid_lease_request","field":"ttl_ms","detail":"ttl_ms must be greater than 1000 and at most 300000"}'::jsonb,
          'ttl_ms = minimum is refused (exclusive bound)');
SELECT is(t.acquire('ttl-2', '{"ttl_ms": 1001}') #>> '{lease,ttl_ms}', '1001', 'ttl_ms = minimum + 1 accepted');
SELECT is(t.acquire('ttl-3', '{"ttl_ms": 300000}') #>> '{lease,ttl_ms}', '300000',
          'ttl_ms = maximum accepted (inclusive bound)');
SELECT is(t.acquire('ttl-4', '{"ttl_ms": 300001}') ->> 'field', 'ttl_ms', 'ttl_ms above maximum refused');
SELECT is(t.acquire('ttl-5', '{"ttl_ms": 1500.5}') ->> 'field', 'ttl_ms', 'a fractional ttl_ms is refused');
SELECT is(t.acquire('ttl-6', '{"ttl_ms": "5000"}') ->> 'field', 'ttl_ms', 'a string ttl_ms is refused');
SELECT is(t.acquire('ttl-7', '{"ttl_ms": null}') #>> '{lease,ttl_ms}', '30000', 'a null ttl_ms takes the default');
SELECT is(t.acquire('ttl-8', '{"ttl_ms": 0}') ->> 'field', 'ttl_ms', 'ttl_ms 0 refused');

-- maximum lifetime caps expires_at -------------------------------------------------
SELECT t.acquire('life-1', '{"ttl_ms": 30000, "maximum_lifetime_ms": 5000}') AS l1 \gset
SELECT is((:'l1'::jsonb #>> '{lease,expires_at}')::timestamptz - (:'l1'::jsonb #>> '{lease,acquired_at}')::timestamptz,
          interval '5 seconds', 'expires_at is capped at acquired_at + maximum_lifetime_ms');
SELECT is(t.acquire('life-2', '{"maximum_lifetime_ms": 3600001}') ->> 'field', 'maximum_lifetime_ms',
          'a lifetime above the policy maximum is refused');
SELECT is(t.acquire('life-3', '{"maximum_lifetime_ms": 1000}') ->> 'field', 'maximum_lifetime_ms',
          'a lifetime not above the minimum TTL is refused');

-- deadline already passed: deadline_exceeded, nothing changes ------------------------
RESET ROLE;
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(t.acquire('late-1', jsonb_build_object('deadline_at', t.rfc3339(now() - interval '1 ms'))),
          '{"code":"deadline_exceeded"}'::jsonb, 'a passed deadline answers deadline_exceeded');
SELECT is(t.acquire('late-2', jsonb_build_object('deadline_at', t.rfc3339(now()))) ->> 'code',
          'deadline_exceeded', 'a deadline equal to backend time has passed');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'a late acquire changes nothing');

-- request shape: invalid fields are typed results, malformed calls raise LS003 -------
SET LOCAL ROLE lease_service;
SELECT is(lease.acquire(t.acq('f-1') - 'service_instance_id') ->> 'field', 'service_instance_id',
          'service_instance_id is required');
SELECT is(t.acquire('f-2', '{"execution_id": "bad id"}') ->> 'field', 'execution_id',
          'execution_id must be an identifier');
SELECT is(lease.acquire(t.acq('f-3') - 'job_id') ->> 'field', 'job_id', 'job_id is required');
SELECT is(t.acquire('f-4', '{"trace_id": "bad/trace"}') ->> 'field', 'trace_id', 'a bad trace_id is refused');
SELECT is(lease.acquire(t.acq('f-5') - 'trace_id') ->> 'code', 'lease_acquired', 'trace_id is optional');
SELECT throws_ok($$SELECT lease.acquire(t.acq('f-6') - 'deadline_at')$$, 'LS003', NULL,
                 'a call without deadline_at is malformed (LS003)');
SELECT throws_ok($$SELECT lease.acquire(t.acq('f-7') - 'request_digest')$$, 'LS003', NULL,
                 'a mutation without request_digest is malformed (LS003)');
SELECT throws_ok($$SELECT lease.acquire(t.acq('f-8') - 'principal')$$, 'LS003', NULL,
                 'a call without principal is malformed (LS003)');
SELECT throws_ok($$SELECT lease.acquire('[]'::jsonb)$$, 'LS003', NULL, 'a non-object request is malformed');

-- metadata ---------------------------------------------------------------------
SELECT is(t.acquire('m-1', '{"metadata": {"attempt": 2, "source": "scheduler", "retry": true}}')
            #> '{lease,metadata}',
          '{"attempt": 2, "source": "scheduler", "retry": true}'::jsonb, 'valid metadata is stored');
SELECT is(t.acquire('m-2') #> '{lease,metadata}', '{}'::jsonb, 'absent metadata is {}');
SELECT is(t.acquire('m-3', '{"metadata": [1]}') ->> 'field', 'metadata', 'metadata must be an object');
SELECT is(t.acquire('m-4', '{"metadata": {"Bad-Key": 1}}') ->> 'field', 'metadata.Bad-Key',
          'metadata keys are [a-z0-9_]');
SELECT is(t.acquire('m-5', '{"metadata": {"nested": {"a": 1}}}') ->> 'field', 'metadata.nested',
          'metadata is flat');
SELECT is(t.acquire('m-6', '{"metadata": {"list": [1]}}') ->> 'field', 'metadata.list',
          'metadata values are not arrays');
SELECT is(t.acquire('m-7', '{"metadata": {"n": null}}') ->> 'field', 'metadata.n',
          'metadata values are not null');
SELECT is(t.acquire('m-8', jsonb_build_object('metadata', jsonb_build_object('s', repeat('x', 257))))
            ->> 'field', 'metadata.s', 'a metadata string over 256 bytes is refused');
SELECT is(t.acquire('m-9', jsonb_build_object('metadata', jsonb_build_object('s', repeat('x', 256))))
            ->> 'code', 'lease_acquired', 'a metadata string of 256 bytes is accepted');
SELECT is(t.acquire('m-10', jsonb_build_object('metadata',
            (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 17) g))) ->> 'field',
          'metadata', 'a 17th metadata key is refused naming metadata');
SELECT is(t.acquire('m-11', jsonb_build_object('metadata',
            (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 16) g))) ->> 'code',
          'lease_acquired', '16 metadata keys are accepted');
SELECT is(t.acquire('m-12', jsonb_build_object('metadata',
            (SELECT jsonb_object_agg('k' || g, repeat('v', 250)) FROM generate_series(1, 9) g))) ->> 'field',
          'metadata', 'metadata over 2 KiB in all is refused');

-- sealed namespace refuses ----------------------------------------------------------
RESET ROLE;
UPDATE lease.namespace_state SET sealed = true, sealed_reason = 'test: restored', sealed_at = now();
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(t.acquire('sealed-1'), '{"code":"lease_backend_unavailable","reason":"sealed","detail":"test: restored"}'::jsonb,
          'a sealed namespace refuses acquisition');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'and changes nothing');
UPDATE lease.namespace_state SET sealed = false, sealed_reason = NULL, sealed_at = NULL;

-- the token limit: refuse and alert, never wrap --------------------------------------
UPDATE lease.policy SET token_limit = 10;
SET LOCAL ROLE lease_service;
SELECT t.acquire('limit-1') AS k1 \gset
SELECT is(lease.release(t.ref(:'k1'::jsonb)) ->> 'code', 'lease_released', 'release the first lease');
RESET ROLE;
SELECT t.set_counter(t.ident('limit-1'), 9) AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT t.acquire('limit-1') AS k2 \gset
SELECT is((:'k2'::jsonb #>> '{lease,fencing_token}')::bigint, 10::bigint, 'the token limit itself is allocated');
RESET ROLE;
SELECT t.expire(:'k2'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT t.acq('limit-1') AS kq \gset
SELECT is(lease.acquire(:'kq'::jsonb), '{"code":"lease_backend_unavailable","reason":"token_limit"}'::jsonb,
          'at the token limit acquisition is refused');
SELECT is(t.acquire('limit-1'), '{"code":"lease_backend_unavailable","reason":"token_limit"}'::jsonb,
          'and refused again (the expired lease is not recorded twice)');
RESET ROLE;
SELECT is(t.counter(t.ident('limit-1')), 10::bigint, 'the counter neither wraps nor moves');
SELECT is((SELECT ARRAY[event_type, priority, decision, result_code] FROM lease.audit_events
            WHERE request_id = :'kq'::jsonb ->> 'request_id'),
          ARRAY['target_lease_alert', 'high', 'error', 'lease_backend_unavailable'],
          'the refusal writes a high-priority audit alert');
SELECT is((SELECT count(*)::int FROM lease.history WHERE lease_id = :'k2'::jsonb #>> '{lease,lease_id}'), 0,
          'a refusal leaves the expired lease row as it was');
SET LOCAL ROLE lease_service;
SELECT is(lease.sweep_expired(100) ->> 'expired', '1', 'the sweeper can still end the expired lease');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM lease.history WHERE lease_id = :'k2'::jsonb #>> '{lease,lease_id}'), 1,
          'which then has exactly one history record');

-- the "existing" hint (the service remembers identities it has seen): only
-- the order of the statements changes, never the answer --------------------------
SET LOCAL ROLE lease_service;
SELECT is(t.acquire('hint-new', '{"existing": true}') #>> '{lease,fencing_token}', '1',
          'a wrong hint on a new identity still creates its row and acquires');
SELECT is(lease.release(t.ref(t.acquire('hint-old'))) ->> 'code', 'lease_released', 'fixture: hint-old held and freed');
SELECT is(t.acquire('hint-old', '{"existing": true}') #>> '{lease,fencing_token}', '2',
          'a right hint acquires the existing row with the next token');
SELECT is(t.acquire('hint-old', '{"existing": true}') ->> 'code', 'lease_conflict',
          'and a held identity still conflicts');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
