CREATE OR REPLACE FUNCTION lease.session_close(
    session_id text, tenant_id text, principal_id text, credential_id text,
    principal_class text, request_id text, request_digest text, deadline_at timestamptz,
    correlation_id text, deadline_class text, latency_ms integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    -- the checks every call shares (LS002, LS003)
    deadline timestamptz := lease._call_deadline_t(deadline_at, principal_id, request_id,
                                                   request_digest);
    tenant text := lease.normalize_component('tenant_id', tenant_id);
    why text;
    x lease.sessions;
    n integer;
    more boolean;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    IF NOT lease._id_text_ok(session_id) THEN
        RETURN lease._invalid('session_id');
    END IF;
    IF (SELECT s.guard_needed FROM lease._settings s) THEN
        why := lease._guard();
        IF why IS NOT NULL THEN
            RETURN lease._sealed_result(why);
        END IF;
    END IF;
    UPDATE lease.sessions AS y
       SET state = 'closed', closed_at = lease._now(), close_request_id = session_close.request_id,
           close_request_digest = decode(session_close.request_digest, 'hex')
     WHERE y.session_id = session_close.session_id AND y.state = 'open'
       AND y.expires_at > now() AND y.tenant_id = tenant
       AND y.principal_id = session_close.principal_id
       AND y.credential_id = session_close.credential_id
    RETURNING * INTO x;
    IF NOT FOUND THEN
        -- perhaps this very request, committed before
        SELECT * INTO x FROM lease.sessions y
         WHERE y.session_id = session_close.session_id AND y.tenant_id = tenant
           AND y.principal_id = session_close.principal_id
           AND y.close_request_id = session_close.request_id;
        IF NOT FOUND THEN
            RETURN lease._result('lease_lost');
        ELSIF x.close_request_digest <> decode(request_digest, 'hex') THEN
            RETURN lease._result('idempotency_conflict');
        END IF;
        RETURN jsonb_build_object('code', 'lease_released', 'session', lease._session_json(x),
                                  'replayed', true);
    END IF;
    INSERT INTO lease.audit_events (
        latency_ms, event_type, decision, result_code, request_id, correlation_id,
        principal_class, principal_id, credential_id, service_instance_id, tenant_id,
        effective_ttl_ms, deadline_class, previous_state, resulting_state, session_id)
    VALUES (latency_ms, 'session_close', 'allow', 'lease_released', request_id,
            left(correlation_id, 64), left(principal_class, 16), principal_id,
            left(credential_id, 128), x.service_instance_id, x.tenant_id, x.ttl_ms,
            left(deadline_class, 16), 'open', 'closed', x.session_id);
    -- its leases: released now, a bounded batch here (the rest are expired
    -- for every path from this commit on, and the sweeper moves them)
    n := lease._session_end_leases(x.session_id, 1000, 'released', lease._now(), principal_id,
                                   credential_id, principal_class, request_id, correlation_id,
                                   'session closed');
    more := n = 1000;
    RETURN jsonb_build_object('code', 'lease_released', 'session', lease._session_json(x),
                              'leases_ended', n, 'more', more, 'replayed', false);
END
$function$;

COMMENT ON FUNCTION lease.session_close(text,text,text,text,text,text,text,timestamp with time zone,text,text,integer) IS
    'Closes a session (issue 37): only the principal and credential that opened it, within its tenant, while it is open and unexpired. Every lease in it ends at once for every path (lease._effective_expiry: closed_at); up to 1,000 of them are released here, each with its history row and audit event (reason "session closed"), the rest by the sweeper (more: true). Answers lease_released with the session, leases_ended and more; a repeated request id answers the closed session again (replayed true; idempotency_conflict when its digest differs); a session closed, expired, unknown or another''s answers lease_lost and writes nothing. Checks, in order: the shared call checks (LS002/LS003), the deadline, session_id; then the namespace guard. The session_close audit event commits with the change.';

REVOKE ALL ON FUNCTION lease.session_close(text,text,text,text,text,text,text,timestamp with time zone,text,text,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.session_close(text,text,text,text,text,text,text,timestamp with time zone,text,text,integer) TO lease_service;
