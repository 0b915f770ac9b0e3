CREATE OR REPLACE FUNCTION lease.session_open(
    tenant_id text, service_instance_id text, ttl_ms bigint, principal_id text,
    credential_id text, principal_class text, request_id text, request_digest text,
    deadline_at timestamptz, correlation_id text, deadline_class text, latency_ms integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    -- the checks every call shares (LS002, LS003)
    deadline timestamptz := lease._call_deadline_t(deadline_at, principal_id, request_id,
                                                   request_digest);
    s lease._settings;
    tenant text := lease.normalize_component('tenant_id', tenant_id);
    ttl bigint;
    why text;
    x lease.sessions;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    SELECT * INTO s FROM lease._settings;
    -- NULL: the policy's default; out of its bounds: refused
    ttl := CASE WHEN ttl_ms IS NULL THEN s.default_ttl_ms
                WHEN ttl_ms > s.minimum_ttl_ms AND ttl_ms <= s.maximum_ttl_ms THEN ttl_ms END;
    IF tenant IS NULL THEN
        RETURN lease._invalid('tenant_id');
    ELSIF NOT lease._id_text_ok(service_instance_id) THEN
        RETURN lease._invalid('service_instance_id');
    ELSIF NOT lease._id_text_ok(credential_id) THEN
        RETURN lease._invalid('credential_id');
    ELSIF ttl IS NULL THEN
        RETURN lease._invalid('ttl_ms', 'ttl_ms must be greater than ' || s.minimum_ttl_ms
                                        || ' and at most ' || s.maximum_ttl_ms);
    END IF;
    IF s.guard_needed THEN
        why := lease._guard();
        IF why IS NOT NULL THEN
            RETURN lease._sealed_result(why);
        END IF;
    END IF;
    -- A new request id creates the row before anything reads it (the unique
    -- index on tenant, principal and request id decides); a repeat finds
    -- its row and gets the same session.
    INSERT INTO lease.sessions (session_id, tenant_id, principal_id, credential_id,
                                service_instance_id, ttl_ms, expires_at, state, created_at,
                                renewed_at, open_request_id, open_request_digest)
    VALUES (lease._new_session_id(now()), tenant, principal_id, credential_id,
            service_instance_id, ttl, lease._now() + lease._ms(ttl), 'open', lease._now(),
            lease._now(), request_id, decode(request_digest, 'hex'))
    ON CONFLICT ON CONSTRAINT sessions_open_request DO NOTHING
    RETURNING * INTO x;
    IF NOT FOUND THEN
        SELECT * INTO x FROM lease.sessions y
         WHERE y.tenant_id = tenant AND y.principal_id = session_open.principal_id
           AND y.open_request_id = session_open.request_id;
        IF x.open_request_digest <> decode(request_digest, 'hex') THEN
            RETURN lease._result('idempotency_conflict');
        END IF;
        RETURN jsonb_build_object('code', 'lease_acquired', 'session', lease._session_json(x),
                                  'replayed', true);
    END IF;
    result := jsonb_build_object('code', 'lease_acquired', 'session', lease._session_json(x),
                                 'replayed', false);
    INSERT INTO lease.audit_events (
        latency_ms, event_type, decision, result_code, request_id, correlation_id,
        principal_class, principal_id, credential_id, service_instance_id, tenant_id,
        requested_ttl_ms, effective_ttl_ms, deadline_class, previous_state, resulting_state,
        session_id)
    VALUES (latency_ms, 'session_open', 'allow', 'lease_acquired', request_id,
            left(correlation_id, 64), left(principal_class, 16), principal_id,
            left(credential_id, 128), service_instance_id, tenant, ttl_ms, ttl,
            left(deadline_class, 16), 'none', 'open', x.session_id);
    RETURN result;
END
$function$;

COMMENT ON FUNCTION lease.session_open(text,text,bigint,text,text,text,text,text,timestamp with time zone,text,text,integer) IS
    'Opens a session (issue 37; docs/sql-api.md, "Sessions"): one row of lease.sessions owned by this principal and credential within tenant_id, expiring ttl_ms (NULL: the policy''s default; within its bounds) after backend time unless kept alive (lease.session_keepalive). Answers lease_acquired with the session (the contract''s closed set of codes: a session is held like a lease); a repeated request id (per tenant and principal) answers the same session (replayed true), or idempotency_conflict when its digest differs. Checks, in order: the shared call checks (LS002/LS003), the deadline, tenant_id, service_instance_id, credential_id, ttl_ms; then the namespace guard. The session_open audit event commits with the row.';

REVOKE ALL ON FUNCTION lease.session_open(text,text,bigint,text,text,text,text,text,timestamp with time zone,text,text,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.session_open(text,text,bigint,text,text,text,text,text,timestamp with time zone,text,text,integer) TO lease_service;
