CREATE OR REPLACE FUNCTION lease._renew(p jsonb, brief boolean, s lease._settings)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    -- the checks every jsonb call shares first (LS002/LS003)
    deadline timestamptz := lease._call_deadline(p, true);
    li jsonb := p -> 'lock_identity';
    m lease.identity := lease._identity_members(li);
    ttl_v jsonb := p -> 'ttl_ms';
BEGIN
    -- lease._renew_t decides. A JSON value of the wrong type becomes a value
    -- that fails the same check there (NULL, or -1 for a TTL that is not an
    -- integer), so the field named is the one it always was; the identity's
    -- shape (an object of the seven members) is lease._identity_members's
    -- bad_field.
    RETURN lease._renew_t(
        m.tenant_id, m.program_id, m.target_namespace, m.target_id, m.actor_name,
        m.workflow_name, m.operation_class,
        CASE WHEN jsonb_typeof(p -> 'lease_id') = 'string' THEN p ->> 'lease_id' END,
        lease._int(p -> 'fencing_token'),
        CASE WHEN coalesce(jsonb_typeof(ttl_v), 'null') = 'null' THEN NULL
             ELSE coalesce(lease._int(ttl_v), -1) END,
        CASE WHEN jsonb_typeof(p -> 'service_instance_id') = 'string'
             THEN p ->> 'service_instance_id' END,
        p #>> '{principal,principal_id}', p #>> '{principal,principal_class}',
        p #>> '{principal,credential_id}', p ->> 'request_id', p ->> 'request_digest', deadline,
        p ->> 'correlation_id', p ->> 'trace_id', p ->> 'deadline_class',
        lease._int(p -> 'latency_ms')::integer, brief, s, m.bad_field);
END
$function$;

COMMENT ON FUNCTION lease._renew(jsonb,boolean,lease._settings) IS
    'A jsonb renewal (lease.renew, and each item of lease.renew_many) decided by lease._renew_t, the one renew-if-owner decision: the request''s members as typed values, after the checks every jsonb call shares (lease._call_deadline). A member of the wrong JSON type reaches lease._renew_t as a value that fails the same check, so each refusal names the field it always named; an identity that is not an object of the seven members is named here (lease._identity). `s` is lease._settings as the caller read it. No exception block: see lease._renew_t.';

REVOKE ALL ON FUNCTION lease._renew(jsonb,boolean,lease._settings) FROM PUBLIC;
