CREATE OR REPLACE FUNCTION lease.acquire(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    -- the checks every jsonb call shares first (LS002/LS003)
    deadline timestamptz := lease._call_deadline(p, true);
    li jsonb := p -> 'lock_identity';
    m lease.identity := lease._identity_members(li);
BEGIN
    -- an identity that is not an object of the seven members is refused
    -- where the decider would refuse it: after the shared checks
    -- (lease._call_deadline, above) and the deadline, before its components
    IF m.bad_field IS NOT NULL THEN
        IF now() >= deadline THEN
            RETURN lease._result('deadline_exceeded');
        END IF;
        RETURN lease._invalid(m.bad_field);
    END IF;
    -- lease.acquire_brief_typed decides, on the identity as it was read (m)
    -- and the other members as its lease.acquire_request. A JSON value of
    -- the wrong type becomes a value that fails the same check there (NULL,
    -- chr(1) where NULL is allowed, -1 for a TTL that is not an integer), so
    -- the field named is the one it always was.
    RETURN lease.acquire_brief_typed(m, ROW(
        CASE WHEN jsonb_typeof(p -> 'service_instance_id') = 'string'
             THEN p ->> 'service_instance_id' END,
        CASE WHEN jsonb_typeof(p -> 'execution_id') = 'string' THEN p ->> 'execution_id' END,
        CASE WHEN jsonb_typeof(p -> 'job_id') = 'string' THEN p ->> 'job_id' END,
        CASE WHEN coalesce(jsonb_typeof(p -> 'trace_id'), 'null') = 'null' THEN NULL
             WHEN jsonb_typeof(p -> 'trace_id') = 'string' THEN p ->> 'trace_id'
             ELSE chr(1) END,
        CASE WHEN coalesce(jsonb_typeof(p -> 'ttl_ms'), 'null') = 'null' THEN NULL
             ELSE coalesce(lease._int(p -> 'ttl_ms'), -1) END,
        CASE WHEN coalesce(jsonb_typeof(p -> 'maximum_lifetime_ms'), 'null') = 'null' THEN NULL
             ELSE coalesce(lease._int(p -> 'maximum_lifetime_ms'), -1) END,
        p -> 'metadata',
        p #>> '{principal,principal_id}', p #>> '{principal,client_id}',
        p #>> '{principal,credential_id}', p #>> '{principal,principal_class}',
        p ->> 'request_id', p ->> 'request_digest', deadline, p ->> 'correlation_id',
        p ->> 'deadline_class', lease._int(p -> 'latency_ms')::integer,
        p ->> 'session_id')::lease.acquire_request, brief => false);
END
$function$;

COMMENT ON FUNCTION lease.acquire(jsonb) IS
    'acquire-if-free (lease.acquire_brief_typed decides, on the request''s members as typed values: a member of the wrong JSON type reaches it as a value that fails the same check, so each refusal names the field it always named), answered with the whole lease record (docs/sql-api.md, "Result shape"). A new identity is one INSERT ... ON CONFLICT DO NOTHING before anything reads it (the unique indexes decide: concurrent first acquisitions do not fail each other under SERIALIZABLE); an existing free or expired one is one UPDATE with the exact condition; a conflict or a corrupt row is decided after reading the row (LS001 fails closed). A repeated request id is answered from its stored record. Runs the namespace guard first; the idempotency record and audit event commit with the change. Every member of the request other than the documented ones ("brief" included) is ignored.';

REVOKE ALL ON FUNCTION lease.acquire(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.acquire(jsonb) TO lease_service;
