CREATE OR REPLACE FUNCTION lease._end(p jsonb, op text, terminal_state text, success_code text,
                                     brief boolean, own_subtransaction boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    -- the checks every jsonb call shares first (LS002/LS003)
    deadline timestamptz := lease._call_deadline(p, true);
    li jsonb := p -> 'lock_identity';
    m lease.identity := lease._identity_members(li);
BEGIN
    -- lease._end_t decides. A JSON value of the wrong type becomes a value
    -- that fails the same check there (NULL, or chr(1) where NULL is
    -- allowed), so the field named is the one it always was; the identity's
    -- shape (an object of the seven members) is lease._identity_members's
    -- bad_field.
    RETURN lease._end_t(
        m,
        ROW(CASE WHEN jsonb_typeof(p -> 'lease_id') = 'string' THEN p ->> 'lease_id' END,
            lease._int(p -> 'fencing_token'),
            CASE WHEN jsonb_typeof(p -> 'service_instance_id') = 'string'
                 THEN p ->> 'service_instance_id' END,
            p #>> '{principal,principal_id}', p #>> '{principal,principal_class}',
            p #>> '{principal,credential_id}', p ->> 'request_id', p ->> 'request_digest',
            deadline, p ->> 'correlation_id', p ->> 'trace_id', p ->> 'deadline_class',
            lease._int(p -> 'latency_ms')::integer)::lease.release_request,
        CASE WHEN jsonb_typeof(p -> 'reason') = 'string' THEN p ->> 'reason' END,
        CASE WHEN coalesce(jsonb_typeof(p -> 'incident_id'), 'null') = 'null' THEN NULL
             WHEN jsonb_typeof(p -> 'incident_id') = 'string' THEN p ->> 'incident_id'
             ELSE chr(1) END,
        op, terminal_state, success_code, brief, m.bad_field, own_subtransaction);
END
$function$;

COMMENT ON FUNCTION lease._end(jsonb,text,text,text,boolean,boolean) IS
    'A jsonb ending (lease.release, force_release, revoke, and each item of lease.release_many) decided by lease._end_t, the one end-if-matching decision: the request''s members as typed values, after the checks every jsonb call shares (lease._call_deadline). A member of the wrong JSON type reaches lease._end_t as a value that fails the same check, so each refusal names the field it always named; an identity that is not an object of the seven members is named here (lease._identity). brief: the short answer (lease._ended_json) instead of the history record; the decision is the same. own_subtransaction: see lease._end_t (false only for lease.release_many''s first pass).';

REVOKE ALL ON FUNCTION lease._end(jsonb,text,text,text,boolean,boolean) FROM PUBLIC;
