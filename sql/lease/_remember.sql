CREATE OR REPLACE FUNCTION lease._remember(k text, op text, p jsonb, result jsonb, lease_id text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO lease.idempotency (lock_key, operation, owner_principal_id, request_id,
                                   request_digest, result, lease_id, created_at, expires_at)
    SELECT k, op, p #>> '{principal,principal_id}', p ->> 'request_id',
           decode(p ->> 'request_digest', 'hex'), result, lease_id, lease._now(),
           lease._now() + lease._ms(pol.idempotency_retention_ms)
      FROM lease.policy pol;
END
$function$;

COMMENT ON FUNCTION lease._remember(text,text,jsonb,jsonb,text) IS
    'Stores the typed result of a state-changing request with its mutation (fenced_commit; the lease operations use lease._evidence).';

REVOKE ALL ON FUNCTION lease._remember(text,text,jsonb,jsonb,text) FROM PUBLIC;
