CREATE OR REPLACE FUNCTION lease._replay_answer(k text, x lease.idempotency_keys,
                                                a lease.audit_events)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    lid text := coalesce(a.lease_id, x.answer #>> '{lease,lease_id}', x.answer ->> 'lease_id');
    op text := substr(a.event_type, length('target_lease_') + 1);
    at timestamptz := date_trunc('milliseconds', a.occurred_at);
    l lease.locks;
    h lease.history;
    cur text;
    answer jsonb := x.answer;
BEGIN
    -- the lease as it is now: the row's while it is the row's lease, its
    -- history row after (the history outlives the idempotency record:
    -- history_retention_ms >= idempotency_retention_ms)
    IF lid IS NOT NULL THEN
        SELECT * INTO l FROM lease.locks y WHERE y.lock_key = k AND y.lease_id = lid;
        IF l.state = 'active' THEN
            cur := CASE WHEN lease._effective_expiry(l.session_id, l.expires_at) > now() THEN 'active' ELSE 'expired' END;
        ELSE
            SELECT * INTO h FROM lease.history y WHERE y.lease_id = lid;
            cur := h.state;
        END IF;
    END IF;
    IF answer IS NULL THEN
        -- The answer of the request, rebuilt: what the request changed is
        -- the audit event's (its code, its time, the effective TTL, a renewal's lease_acquired_at), the
        -- rest is the lease's and never changes while it lives.
        IF op IN ('acquire', 'renew') AND l.lock_key IS NULL AND h.lease_id IS NOT NULL THEN
            l := jsonb_populate_record(NULL::lease.locks, to_jsonb(h) - 'state');
        END IF;
        IF op IN ('acquire', 'renew') AND l.lock_key IS NOT NULL THEN
            -- acquired when the acquisition's event says, or as the
            -- renewal's event recorded it: the answer owes nothing to the
            -- row's times as they are now
            l.acquired_at := CASE WHEN op = 'acquire' THEN at
                                  ELSE coalesce(a.lease_acquired_at, l.acquired_at) END;
            l.renewed_at := at;
            l.ttl_ms := a.effective_ttl_ms;
            l.expires_at := least(at + lease._ms(a.effective_ttl_ms),
                                  l.acquired_at + lease._ms(l.maximum_lifetime_ms));
            answer := jsonb_build_object('code', a.result_code, 'lease', CASE
                WHEN NOT x.brief
                    -- the state it had when it was answered
                    THEN jsonb_set(lease._lease_json(l), '{state}', '"active"')
                WHEN op = 'renew' THEN lease._renewed_json(l)
                ELSE jsonb_build_object(
                    'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
                    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.acquired_at),
                    'expires_at', lease._ts(l.expires_at), 'ttl_ms', l.ttl_ms,
                    'maximum_lifetime_ms', l.maximum_lifetime_ms,
                    'owner_client_id', l.owner_client_id,
                    'owner_credential_id', l.owner_credential_id, 'state', 'active') END);
        ELSIF op IN ('release', 'force_release', 'revoke') AND h.lease_id IS NOT NULL THEN
            answer := jsonb_build_object('code', a.result_code, 'lease', CASE
                WHEN x.brief THEN lease._ended_json(jsonb_populate_record(NULL::lease.locks,
                                                                          to_jsonb(h) - 'state'),
                                                    h.state, h.ended_at)
                ELSE lease._history_json(h) END);
        ELSE
            PERFORM lease._corrupt(k, 'the lease or audit event of an idempotency record is gone');
        END IF;
    END IF;
    RETURN answer || jsonb_build_object('current_state', coalesce(cur, 'expired'));
END
$function$;

COMMENT ON FUNCTION lease._replay_answer(text,lease.idempotency_keys,lease.audit_events) IS
    'The stored answer of a request (lease.idempotency_keys row x, its audit event a, its lock key k), with "current_state": the lease''s state now. The answer is x.answer where one is kept (a fenced commit''s; rows from before migration 0027), else rebuilt exactly as the operation gave it: from the audit event (code, time, effective TTL) and the lease (lease.locks while it is the row''s lease, else lease.history), brief or whole as x.brief says. LS001 when neither the lease nor the audit event is left (retention keeps both longer than the record).';

REVOKE ALL ON FUNCTION lease._replay_answer(text,lease.idempotency_keys,lease.audit_events) FROM PUBLIC;
