-- Audit: every mutation writes exactly one event, in its transaction, with
-- the fields the contract lists and no secret (no lock key, no metadata
-- value, no digest); lease.record_audit inserts the service's batches.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(29);

CREATE FUNCTION t.ev(rid text) RETURNS lease.audit_events LANGUAGE sql STABLE
RETURN (SELECT a FROM lease.audit_events a WHERE a.request_id = rid);

SELECT is_empty($$SELECT c FROM unnest(ARRAY['occurred_at', 'latency_ms', 'event_type', 'priority', 'decision',
                    'result_code', 'retryable', 'backend_health', 'request_id', 'correlation_id', 'trace_id',
                    'execution_id', 'job_id', 'principal_class', 'principal_id', 'credential_id',
                    'service_instance_id', 'tenant_id', 'program_id', 'target_namespace', 'target_id',
                    'actor_name', 'workflow_name', 'operation_class', 'lease_id', 'fencing_token',
                    'requested_ttl_ms', 'effective_ttl_ms', 'deadline_class', 'previous_state',
                    'resulting_state', 'reason', 'incident_id']) c
                   WHERE NOT EXISTS (SELECT 1 FROM information_schema.columns
                                      WHERE table_schema = 'lease' AND table_name = 'audit_events'
                                        AND column_name = c)$$,
                'audit_events has a column for every field the contract lists');

-- one event per mutation -------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acq('target_01', '{"ttl_ms": 45000, "metadata": {"marker_key": "m3t4d4t4-value"}, "latency_ms": 17}') AS aq \gset
SELECT lease.acquire(:'aq'::jsonb) AS a1 \gset
SELECT t.ref(:'a1'::jsonb, '{"ttl_ms": 20000, "deadline_class": "capped"}') AS rq \gset
SELECT lease.renew(:'rq'::jsonb) AS r1 \gset
SELECT t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('d', 0))) AS cq \gset
SELECT lease.fenced_commit(:'cq'::jsonb) AS c1 \gset
SELECT t.ref(:'a1'::jsonb) AS lq \gset
SELECT lease.release(:'lq'::jsonb) AS l1 \gset
SELECT t.acquire() AS a2 \gset
SELECT t.admin(:'a2'::jsonb, 'drain node 4') AS fq \gset
SELECT lease.force_release(:'fq'::jsonb) AS f1 \gset
SELECT t.acquire() AS a3 \gset
SELECT t.admin(:'a3'::jsonb, 'key leaked', '{"incident_id": "INC-77"}') AS vq \gset
SELECT lease.revoke(:'vq'::jsonb) AS v1 \gset
RESET ROLE;

SELECT is((SELECT array_agg(t.audit_count(rid) ORDER BY rid)
             FROM unnest(ARRAY[:'aq'::jsonb ->> 'request_id', :'rq'::jsonb ->> 'request_id', :'cq'::jsonb ->> 'request_id',
                               :'lq'::jsonb ->> 'request_id', :'fq'::jsonb ->> 'request_id', :'vq'::jsonb ->> 'request_id']) rid),
          ARRAY[1, 1, 1, 1, 1, 1]::bigint[], 'acquire, renew, commit, release, force_release, revoke: one event each');

-- acquire: every field
SELECT is((SELECT ARRAY[e.event_type, e.decision, e.result_code, e.retryable::text, e.backend_health, e.priority]
             FROM t.ev(:'aq'::jsonb ->> 'request_id') e),
          ARRAY['target_lease_acquire', 'allow', 'lease_acquired', 'false', 'ok', 'normal'],
          'acquire: event type, decision, result code, retryability, backend health, priority');
SELECT is((SELECT ARRAY[e.request_id, e.correlation_id, e.trace_id, e.execution_id, e.job_id]
             FROM t.ev(:'aq'::jsonb ->> 'request_id') e),
          ARRAY[:'aq'::jsonb ->> 'request_id', :'aq'::jsonb ->> 'correlation_id', 'trace-1', 'exec-1', 'job-1'],
          'acquire: request, correlation, trace, execution and job ids');
SELECT is((SELECT ARRAY[e.principal_class, e.principal_id, e.credential_id, e.service_instance_id]
             FROM t.ev(:'aq'::jsonb ->> 'request_id') e),
          ARRAY['worker', 'p1', 'cred-p1', 'inst-1'], 'acquire: principal class/id, credential id, service instance');
SELECT is((SELECT jsonb_build_object('tenant_id', e.tenant_id, 'program_id', e.program_id,
                                     'target_namespace', e.target_namespace, 'target_id', e.target_id,
                                     'actor_name', e.actor_name, 'workflow_name', e.workflow_name,
                                     'operation_class', e.operation_class)
             FROM t.ev(:'aq'::jsonb ->> 'request_id') e),
          t.ident(), 'acquire: the canonical identity scope');
SELECT is((SELECT ARRAY[e.lease_id, e.fencing_token::text, e.requested_ttl_ms::text, e.effective_ttl_ms::text,
                        e.deadline_class, e.previous_state, e.resulting_state, e.latency_ms::text]
             FROM t.ev(:'aq'::jsonb ->> 'request_id') e),
          ARRAY[:'a1'::jsonb #>> '{lease,lease_id}', '1', '45000', '45000', 'default', 'none', 'active', '17'],
          'acquire: lease id, token, requested/effective TTL, deadline class, previous/resulting state, latency');
SELECT is((SELECT e.occurred_at FROM t.ev(:'aq'::jsonb ->> 'request_id') e), now(),
          'acquire: backend timestamp of the transaction');

-- renew, release, commit
SELECT is((SELECT ARRAY[e.event_type, e.result_code, e.requested_ttl_ms::text, e.effective_ttl_ms::text,
                        e.deadline_class, e.previous_state, e.resulting_state, e.lease_id, e.fencing_token::text]
             FROM t.ev(:'rq'::jsonb ->> 'request_id') e),
          ARRAY['target_lease_renew', 'lease_renewed', '20000', '20000', 'capped', 'active', 'active',
                :'a1'::jsonb #>> '{lease,lease_id}', '1'],
          'renew: TTLs, deadline class, states, lease and token');
SELECT is((SELECT ARRAY[e.event_type, e.result_code, e.previous_state, e.resulting_state, e.service_instance_id,
                        e.execution_id, e.job_id, coalesce(e.reason, '-')]
             FROM t.ev(:'lq'::jsonb ->> 'request_id') e),
          ARRAY['target_lease_release', 'lease_released', 'active', 'released', 'inst-1', 'exec-1', 'job-1', '-'],
          'release: states, instance, execution, job; no reason');
SELECT is((SELECT ARRAY[e.event_type, e.result_code, e.trace_id, e.fencing_token::text]
             FROM t.ev(:'cq'::jsonb ->> 'request_id') e),
          ARRAY['target_lease_commit', 'commit_accepted', 'trace-commit', '1'], 'commit: result, trace, token');

-- administrative events carry the reason and incident, high priority
SELECT is((SELECT ARRAY[e.event_type, e.priority, e.principal_class, e.principal_id, e.credential_id, e.reason,
                        coalesce(e.incident_id, '-'), e.resulting_state]
             FROM t.ev(:'fq'::jsonb ->> 'request_id') e),
          ARRAY['target_lease_force_release', 'high', 'admin', 'adm1', 'cred-adm1', 'drain node 4', '-', 'released'],
          'force_release: administrator, reason, high priority');
SELECT is((SELECT ARRAY[e.event_type, e.priority, e.reason, e.incident_id, e.resulting_state]
             FROM t.ev(:'vq'::jsonb ->> 'request_id') e),
          ARRAY['target_lease_revoke', 'high', 'key leaked', 'INC-77', 'revoked'],
          'revoke: reason, incident id, high priority');

-- no secrets -------------------------------------------------------------------------------
SELECT is_empty(format($$SELECT event_id FROM lease.audit_events a
                         WHERE position('starintel:target-lease:v1:' IN a::text) > 0
                            OR position(%L IN a::text) > 0$$, t.key(t.ident())),
                'no audit event contains a lock key');
SELECT is_empty($$SELECT event_id FROM lease.audit_events a
                   WHERE position('m3t4d4t4-value' IN a::text) > 0 OR position('marker_key' IN a::text) > 0$$,
                'no audit event contains metadata keys or values');
SELECT is_empty(format($$SELECT event_id FROM lease.audit_events a
                         WHERE position(%L IN a::text) > 0 OR position(%L IN a::text) > 0
                            OR position(%L IN a::text) > 0$$,
                       :'aq'::jsonb ->> 'request_digest', :'rq'::jsonb ->> 'request_digest',
                       :'vq'::jsonb ->> 'request_digest'),
                'no audit event contains a request digest');
SET LOCAL ROLE lease_operator;
SELECT is((SELECT count(*)::int FROM lease.audit_log WHERE request_id = :'vq'::jsonb ->> 'request_id'), 1,
          'operators read the events through lease.audit_log');
RESET ROLE;

-- expected outcomes that change nothing are not audited in SQL (the service queues them)
SET LOCAL ROLE lease_service;
SELECT t.acq() AS xq \gset
SELECT t.acquire('target_09') AS holder \gset
SELECT is(t.acquire('target_09', jsonb_build_object('request_id', :'xq'::jsonb ->> 'request_id')) ->> 'code',
          'lease_conflict', 'a conflict');
RESET ROLE;
SELECT is(t.audit_count(:'xq'::jsonb ->> 'request_id'), 0::bigint,
          'writes no audit event in SQL (the service records it through record_audit)');

-- record_audit ----------------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.record_audit(jsonb_build_array(
            jsonb_build_object('event_type', 'target_lease_acquire', 'decision', 'deny', 'result_code', 'access_denied',
                               'request_id', 'batch-1', 'correlation_id', 'corr_b1', 'principal_class', 'worker',
                               'principal_id', 'p9', 'credential_id', 'key_x', 'tenant_id', 'tenant-main',
                               'program_id', 'program-b', 'retryable', false, 'latency_ms', 2),
            jsonb_build_object('event_type', 'target_lease_renew', 'decision', 'error',
                               'result_code', 'lease_backend_unavailable', 'request_id', 'batch-2',
                               'retryable', true, 'backend_health', 'unavailable',
                               'occurred_at', t.rfc3339(now() - interval '2 seconds')))),
          2, 'record_audit inserts a batch of two');
RESET ROLE;
SELECT is((SELECT ARRAY[e.event_type, e.decision, e.result_code, e.principal_id, e.program_id, e.retryable::text,
                        e.backend_health, e.priority]
             FROM t.ev('batch-1') e),
          ARRAY['target_lease_acquire', 'deny', 'access_denied', 'p9', 'program-b', 'false', 'ok', 'normal'],
          'the denied event is stored with its fields and defaults');
SELECT is((SELECT ARRAY[e.backend_health, e.retryable::text, (e.occurred_at = date_trunc('milliseconds', now() - interval '2 seconds'))::text]
             FROM t.ev('batch-2') e),
          ARRAY['unavailable', 'true', 'false'],
          'the backend-failed event keeps health and retryability; its time is the backend''s (0016)');
SET LOCAL ROLE lease_service;
SELECT throws_ok($$SELECT lease.record_audit('[{"event_type":"target_lease_teleport","decision":"allow","result_code":"x"}]')$$,
                 '23514', NULL, 'an unknown event type is rejected');
SELECT throws_ok($$SELECT lease.record_audit('[{"event_type":"target_lease_list","result_code":"lease_listed"}]')$$,
                 '23502', NULL, 'an event without a decision is rejected');
SELECT throws_ok($$SELECT lease.record_audit('[{"event_type":"target_lease_list","decision":"maybe","result_code":"x"}]')$$,
                 '23514', NULL, 'an unknown decision is rejected');
SELECT throws_ok($$SELECT lease.record_audit('{"event_type":"target_lease_list"}')$$, 'LS003', NULL,
                 'a batch that is not an array is a malformed call');
SELECT is(lease.record_audit('[]'), 0, 'an empty batch inserts nothing');
SELECT is(lease.record_audit(jsonb_build_array(jsonb_build_object('event_type', 'target_lease_list', 'decision', 'allow',
            'result_code', 'lease_listed', 'request_id', 'batch-3', 'reason', repeat('r', 600)))), 1,
          'an oversized field is accepted');
RESET ROLE;
SELECT is((SELECT length(e.reason) FROM t.ev('batch-3') e), 512, 'and bounded (reason cut to 512)');

SELECT * FROM finish();
ROLLBACK;
