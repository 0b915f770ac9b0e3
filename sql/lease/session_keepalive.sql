CREATE OR REPLACE FUNCTION lease.session_keepalive(
    session_id text, tenant_id text, principal_id text, credential_id text,
    deadline_at timestamptz)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    why text;
    x lease.sessions;
BEGIN
    PERFORM lease._require_serializable();
    IF NOT coalesce(isfinite(deadline_at), false) THEN
        PERFORM lease._malformed('deadline_at missing or not RFC 3339');
    ELSIF NOT lease._id_text_ok(principal_id) THEN
        PERFORM lease._malformed('principal missing');
    END IF;
    IF now() >= deadline_at THEN
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
    -- The one write of a keep-alive, whatever the session holds: the
    -- session's own row (no indexed column changes: a HOT update), no lease
    -- row, no idempotency record (repeating it extends to now() + TTL
    -- again), no audit event (a keep-alive of an open session changes no
    -- state: docs/contract.md, "Versioned changes").
    UPDATE lease.sessions AS y
       SET expires_at = lease._now() + lease._ms(y.ttl_ms), renewed_at = lease._now()
     WHERE y.session_id = session_keepalive.session_id AND y.state = 'open'
       AND y.expires_at > now()
       AND y.tenant_id = lease.normalize_component('tenant_id', session_keepalive.tenant_id)
       AND y.principal_id = session_keepalive.principal_id
       AND y.credential_id = session_keepalive.credential_id
    RETURNING * INTO x;
    IF NOT FOUND THEN
        -- closed, expired, unknown, or another principal's: the same answer
        RETURN lease._result('lease_lost');
    END IF;
    RETURN jsonb_build_object('code', 'lease_renewed', 'session', lease._session_json(x));
END
$function$;

COMMENT ON FUNCTION lease.session_keepalive(text,text,text,text,timestamp with time zone) IS
    'Keeps a session and every lease in it alive with one write (issue 37): expires_at becomes backend time + the session''s TTL. Only the principal and credential that opened it, within its tenant, and only while it is open and unexpired; anything else (closed, expired, unknown, another principal''s or credential''s) answers lease_lost and writes nothing. Idempotent by value: no request id, no idempotency record; no audit event (state changes only: open and close and expiry are audited). Costs the same whatever the session holds. Checks: SERIALIZABLE (LS002), a finite deadline and a principal (LS003), the deadline, session_id, then the namespace guard.';

REVOKE ALL ON FUNCTION lease.session_keepalive(text,text,text,text,timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.session_keepalive(text,text,text,text,timestamp with time zone) TO lease_service;
