CREATE OR REPLACE FUNCTION lease.renew(p jsonb, own_subtransaction boolean DEFAULT true)
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
    ttl_v jsonb := p -> 'ttl_ms';
    -- A JSON value of the wrong type becomes a value that fails the same
    -- check in lease._renew_t (NULL, or -1 for a TTL that is not an
    -- integer), so the field named is the one it always was.
    lid text := CASE WHEN jsonb_typeof(p -> 'lease_id') = 'string' THEN p ->> 'lease_id' END;
    token bigint := lease._int(p -> 'fencing_token');
    ttl bigint := CASE WHEN coalesce(jsonb_typeof(ttl_v), 'null') = 'null' THEN NULL
                       ELSE coalesce(lease._int(ttl_v), -1) END;
    si text := CASE WHEN jsonb_typeof(p -> 'service_instance_id') = 'string'
                    THEN p ->> 'service_instance_id' END;
    latency integer := lease._int(p -> 'latency_ms')::integer;
    s lease._settings;
BEGIN
    -- an identity that is not an object of the seven members is refused
    -- where the decision would refuse it: after the shared checks
    -- (lease._call_deadline, above) and the deadline, before its components
    IF m.bad_field IS NOT NULL THEN
        IF now() >= deadline THEN
            RETURN lease._result('deadline_exceeded');
        END IF;
        RETURN lease._invalid(m.bad_field);
    END IF;
    IF own_subtransaction THEN
        -- one renewal: lease.renew_brief_typed's block answers a repeated
        -- request id (the one replay path), with the whole record
        -- (m is the identity's composite, its bad_field NULL here; the
        -- ROW written in each call, not assigned to a variable once: that
        -- assignment measured 12,000 instructions a renewal more,
        -- tests/bench/callgrind/pair --plain --renew)
        RETURN lease.renew_brief_typed(
            m,
            ROW(lid, token, ttl, si, p #>> '{principal,principal_id}',
                p #>> '{principal,principal_class}', p #>> '{principal,credential_id}',
                p ->> 'request_id', p ->> 'request_digest', deadline, p ->> 'correlation_id',
                p ->> 'trace_id', p ->> 'deadline_class', latency)::lease.renew_request,
            false);
    END IF;
    -- an item of lease.renew_many's first pass: the batch's block answers
    SELECT * INTO s FROM lease._settings;
    RETURN lease._renew_t(
        m,
        ROW(lid, token, ttl, si, p #>> '{principal,principal_id}',
            p #>> '{principal,principal_class}', p #>> '{principal,credential_id}',
            p ->> 'request_id', p ->> 'request_digest', deadline, p ->> 'correlation_id',
            p ->> 'trace_id', p ->> 'deadline_class', latency)::lease.renew_request,
        false, s);
END
$function$;

COMMENT ON FUNCTION lease.renew(jsonb,boolean) IS
    'renew-if-owner for a jsonb request (psql''s form, and each item of lease.renew_many), answered with the whole lease record: the request''s members as typed values (a member of the wrong JSON type reaches lease._renew_t as a value that fails the same check, so each refusal names the field it always named), decided through lease.renew_brief_typed, which answers a repeated request id from its stored result. renewed_at becomes backend time, expires_at min(now + ttl, acquired_at + lifetime); the token never changes. own_subtransaction false is only lease.renew_many''s first pass: lease._renew_t decides directly and the batch''s block answers a repeat. Every member of the request other than the documented ones ("brief" included) is ignored.';

REVOKE ALL ON FUNCTION lease.renew(jsonb,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew(jsonb,boolean) TO lease_service;
