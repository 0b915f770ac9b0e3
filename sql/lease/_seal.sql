CREATE OR REPLACE FUNCTION lease._seal(why text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE lease.namespace_state
       SET sealed = true, sealed_reason = left(why, 512), sealed_at = lease._now(),
           checked_at = lease._now()
     WHERE NOT sealed;
    IF FOUND THEN
        PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                             'target_lease_alert', 'lease_backend_unavailable',
                             jsonb_build_object('decision', 'error', 'priority', 'high',
                                                'reason', left('namespace sealed: ' || why, 512)));
    END IF;
END
$function$;

COMMENT ON FUNCTION lease._seal(text) IS
    'Seals the namespace for `why` (once) with a high-priority audit event.';

REVOKE ALL ON FUNCTION lease._seal(text) FROM PUBLIC;
