CREATE OR REPLACE FUNCTION lease._session_end_leases(
    sid text, batch integer, terminal_state text, ended_at timestamptz, principal_id text,
    credential_id text, principal_class text, request_id text, correlation_id text,
    reason text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    r record;
    l lease.locks;
    n integer := 0;
BEGIN
    -- Bounded: at most batch leases in this transaction; the rest are
    -- already expired for every path (lease._effective_expiry) and the
    -- sweeper moves them (lease.expire_due). SKIP LOCKED: a lease another
    -- transaction is ending or committing is theirs.
    FOR r IN SELECT x.lock_key, x.lease_id, x.fencing_token FROM lease.locks x
              WHERE x.session_id = sid AND x.state = 'active'
              ORDER BY x.lock_key LIMIT batch FOR UPDATE SKIP LOCKED LOOP
        UPDATE lease.locks SET state = 'free'
         WHERE lock_key = r.lock_key AND state = 'active' AND lease_id = r.lease_id
           AND fencing_token = r.fencing_token
        RETURNING * INTO l;
        CONTINUE WHEN NOT FOUND;
        n := n + 1;
        IF l.expires_at <= ended_at THEN
            -- its own TTL or lifetime ran out first: expired then
            PERFORM lease._to_history_t(l, 'expired', l.expires_at, NULL, NULL, NULL, NULL);
            CONTINUE;
        END IF;
        PERFORM lease._to_history_t(l, terminal_state, ended_at,
                                    CASE WHEN terminal_state = 'released' THEN principal_id END,
                                    CASE WHEN terminal_state = 'released' THEN credential_id END,
                                    reason, NULL);
        IF terminal_state = 'released' THEN
            -- each lease's end keeps its audit event, naming the session
            INSERT INTO lease.audit_events (
                event_type, decision, result_code, request_id, correlation_id, trace_id,
                execution_id, job_id, principal_class, principal_id, credential_id,
                service_instance_id, tenant_id, program_id, target_namespace, target_id,
                actor_name, workflow_name, operation_class, lease_id, fencing_token,
                effective_ttl_ms, previous_state, resulting_state, reason, session_id)
            VALUES ('target_lease_release', 'allow', 'lease_released', request_id,
                    left(correlation_id, 64), l.trace_id, l.execution_id, l.job_id,
                    left(principal_class, 16), principal_id, left(credential_id, 128),
                    l.service_instance_id, l.tenant_id, l.program_id, l.target_namespace,
                    l.target_id, l.actor_name, l.workflow_name, l.operation_class, l.lease_id,
                    l.fencing_token, l.ttl_ms, 'active', terminal_state, reason, sid);
        END IF;
    END LOOP;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease._session_end_leases(text,integer,text,timestamp with time zone,text,text,text,text,text,text) IS
    'Ends up to batch leases of a session (its close: released at ended_at, by the principal that closed it, each with its history row and audit event naming the session; its expiry: expired at the session''s end, history only, as any expiry). A lease whose own expires_at came first is expired at that time. Returns how many it ended; the others stay for the next batch, already expired for every path (lease._effective_expiry).';

REVOKE ALL ON FUNCTION lease._session_end_leases(text,integer,text,timestamp with time zone,text,text,text,text,text,text) FROM PUBLIC;
