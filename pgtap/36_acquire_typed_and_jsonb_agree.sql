-- lease.acquire_brief_typed, what the service calls for an acquisition,
-- is the decision lease.acquire makes (lease.acquire calls it): the
-- same row (a new identity and a free one), the same evidence, conflicts,
-- one idempotency for both, and each refusal naming the field the jsonb
-- request's refusal names.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(27);

SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          'the service may call lease.acquire_brief_typed, PUBLIC may not')
  FROM (VALUES ('lease.acquire_brief_typed(lease.identity,lease.acquire_request,boolean)')) v(f);
SELECT hasnt_function('lease', '_acquire_t', 'one decider: lease._acquire_t is gone');

SET LOCAL ROLE lease_service;
-- the same acquisition of two new identities, one typed, one as jsonb
SELECT t.acq('atyped_1', '{"ttl_ms": 45000, "maximum_lifetime_ms": 600000, "metadata": {"run": 7, "tag": "a", "r": 0.1}}') AS q1 \gset
SELECT t.acq('atyped_2', '{"ttl_ms": 45000, "maximum_lifetime_ms": 600000, "metadata": {"run": 7, "tag": "a", "r": 0.1}}') AS q2 \gset
SELECT t.acquire_typed(:'q1'::jsonb) AS typed \gset
SELECT lease.acquire(:'q2'::jsonb) AS json \gset
SELECT t.acquire_typed(:'q2'::jsonb) AS json_then_typed \gset
SELECT lease.acquire(:'q1'::jsonb) AS typed_then_json \gset
SELECT t.acquire_typed(:'q1'::jsonb || jsonb_build_object('request_digest', t.digest())) AS conflict_digest \gset
SELECT t.acquire_typed(t.acq('atyped_1')) AS held \gset
-- a free identity (released): the update path, the next token
SELECT lease.release(t.req() || jsonb_build_object(
           'lock_identity', t.ident('atyped_1'), 'service_instance_id', 'inst-1',
           'lease_id', :'typed'::jsonb #> '{lease,lease_id}',
           'fencing_token', :'typed'::jsonb #> '{lease,fencing_token}')) ->> 'code' AS released \gset
SELECT t.acquire_typed(t.acq('atyped_1')) AS again \gset
RESET ROLE;

SELECT is(:'typed'::jsonb ->> 'code', 'lease_acquired', 'typed: acquired');
SELECT is(ARRAY(SELECT jsonb_object_keys(:'typed'::jsonb -> 'lease') ORDER BY 1),
          ARRAY['acquired_at', 'expires_at', 'fencing_token', 'lease_id', 'maximum_lifetime_ms', 'owner_client_id', 'owner_credential_id', 'renewed_at', 'state', 'ttl_ms'],
          'the brief record (docs/sql-api.md, "Result shape")');
-- (the typed lease was released since: its row is in history)
SELECT is((SELECT ROW(fencing_token, owner_principal_id, owner_client_id, owner_credential_id,
                      service_instance_id, execution_id, job_id, trace_id, ttl_ms,
                      maximum_lifetime_ms, metadata, expires_at - acquired_at)::text
             FROM lease.history WHERE lease_id = :'typed'::jsonb #>> '{lease,lease_id}'),
          (SELECT ROW(fencing_token, owner_principal_id, owner_client_id, owner_credential_id,
                      service_instance_id, execution_id, job_id, trace_id, ttl_ms,
                      maximum_lifetime_ms, metadata, expires_at - acquired_at)::text
             FROM lease.locks WHERE lease_id = :'json'::jsonb #>> '{lease,lease_id}'),
          'the lease is the jsonb path''s');
SELECT is((SELECT ARRAY[tenant_id, program_id, target_namespace, target_id, actor_name,
                        workflow_name, operation_class, lock_key]
             FROM lease.history WHERE lease_id = :'typed'::jsonb #>> '{lease,lease_id}'),
          ARRAY['tenant-main', 'program-a', 'starintel-target', 'atyped_1', 'usernamegen',
                'default', 'default', t.key(t.ident('atyped_1'))], 'the identity and its key');
SELECT is((SELECT ARRAY[operation::text, owner_principal_id, encode(request_digest, 'hex'),
                        result ->> 'code']
             FROM lease.idempotency WHERE request_id = :'q1'::jsonb ->> 'request_id'),
          ARRAY['acquire', 'p1', :'q1'::jsonb ->> 'request_digest', 'lease_acquired'],
          'the idempotency record');
SELECT is((SELECT ROW(event_type, priority, decision, result_code, trace_id, execution_id,
                      job_id, principal_class, principal_id, credential_id, service_instance_id,
                      requested_ttl_ms, effective_ttl_ms, deadline_class, latency_ms,
                      previous_state, resulting_state)::text
             FROM lease.audit_events WHERE request_id = :'q1'::jsonb ->> 'request_id'),
          (SELECT ROW(event_type, priority, decision, result_code, trace_id, execution_id,
                      job_id, principal_class, principal_id, credential_id, service_instance_id,
                      requested_ttl_ms, effective_ttl_ms, deadline_class, latency_ms,
                      previous_state, resulting_state)::text
             FROM lease.audit_events WHERE request_id = :'q2'::jsonb ->> 'request_id'),
          'the audit event is the jsonb path''s');
SELECT is(:'typed_then_json'::jsonb ->> 'replayed', 'true', 'a typed request id is replayed as jsonb');
SELECT is(:'json_then_typed'::jsonb ->> 'replayed', 'true', 'a jsonb request id is replayed typed');
SELECT is(:'json_then_typed'::jsonb - '{replayed,current_state}'::text[],
          :'json'::jsonb - '{replayed,current_state}'::text[], 'with the stored answer');
SELECT is(:'conflict_digest'::jsonb ->> 'code', 'idempotency_conflict', 'another digest: idempotency_conflict');
SELECT is(:'held'::jsonb ->> 'code', 'lease_conflict', 'a held identity: lease_conflict');
SELECT ok((:'held'::jsonb ->> 'retry_after_ms')::int > 0, 'with retry_after_ms');
SELECT is(:'released'::text, 'lease_released', '(released)');
SELECT is(:'again'::jsonb #>> '{lease,fencing_token}', '2', 'a free identity: the next token');

CREATE FUNCTION t.both(r jsonb) RETURNS text[] LANGUAGE sql VOLATILE
RETURN ARRAY[t.acquire_typed(r) ->> 'field', lease.acquire(r) ->> 'field'];
SELECT is(t.both(t.acq('atyped_x', '{"lock_identity": {"tenant_id": "bad tenant", "program_id": "program-a", "target_namespace": "starintel-target", "target_id": "atyped_x", "actor_name": "usernamegen", "workflow_name": "default"}, "job_id": "a b"}')),
          ARRAY['lock_identity.tenant_id', 'lock_identity.tenant_id'], 'a bad tenant first');
SELECT is(t.both(t.acq('atyped_x', '{"service_instance_id": "a b"}')),
          ARRAY['service_instance_id', 'service_instance_id'], 'service_instance_id');
SELECT is(t.both(t.acq('atyped_x', '{"execution_id": "a b"}')),
          ARRAY['execution_id', 'execution_id'], 'execution_id');
SELECT is(t.both(t.acq('atyped_x', '{"job_id": "a b"}')), ARRAY['job_id', 'job_id'], 'job_id');
SELECT is(t.both(t.acq('atyped_x', '{"trace_id": "a b"}')), ARRAY['trace_id', 'trace_id'], 'trace_id');
SELECT is(t.both(t.acq('atyped_x', '{"ttl_ms": 1}')), ARRAY['ttl_ms', 'ttl_ms'], 'ttl_ms');
SELECT is(t.acquire_typed(t.acq('atyped_x', '{"ttl_ms": 1}')) ->> 'detail',
          lease.acquire(t.acq('atyped_x', '{"ttl_ms": 1}')) ->> 'detail', 'with the same detail');
SELECT is(t.both(t.acq('atyped_x', '{"maximum_lifetime_ms": 1}')),
          ARRAY['maximum_lifetime_ms', 'maximum_lifetime_ms'], 'maximum_lifetime_ms');
SELECT is(t.both(t.acq('atyped_x', '{"metadata": [1]}')), ARRAY['metadata', 'metadata'],
          'metadata that is not an object');
SELECT is(t.both(t.acq('atyped_x', '{"metadata": null}')), ARRAY['metadata', 'metadata'],
          'metadata null');
SELECT throws_ok($$SELECT t.acquire_typed(t.acq('atyped_x', '{"request_digest": "zz"}'))$$,
                 'LS003', NULL, 'a digest that is not 64 hex digits: LS003');

SELECT * FROM finish();
ROLLBACK;
