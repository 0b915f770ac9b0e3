CREATE OR REPLACE FUNCTION lease._evidence(p jsonb, op text, l lease.locks, result jsonb, retention_ms bigint, previous_state text, resulting_state text, requested_ttl_ms bigint, reason text, incident_id text)
 RETURNS boolean
 LANGUAGE sql
 VOLATILE
RETURN lease._evidence_t(op, l, result, retention_ms, previous_state, resulting_state,
                         requested_ttl_ms, reason, incident_id, p #>> '{principal,principal_id}',
                         p #>> '{principal,principal_class}', p #>> '{principal,credential_id}',
                         p ->> 'request_id', p ->> 'request_digest', p ->> 'correlation_id',
                         p ->> 'trace_id', p ->> 'deadline_class',
                         lease._int(p -> 'latency_ms')::integer);

COMMENT ON FUNCTION lease._evidence(jsonb,text,lease.locks,jsonb,bigint,text,text,bigint,text,text) IS
    'lease._evidence_t with a jsonb request''s values (its principal, request id, digest, correlation, trace, deadline class and latency): the idempotency record and audit event of a state-changing lease operation, in its transaction. A SQL function, inlined where it is called. Returns true.';

REVOKE ALL ON FUNCTION lease._evidence(jsonb,text,lease.locks,jsonb,bigint,text,text,bigint,text,text) FROM PUBLIC;
