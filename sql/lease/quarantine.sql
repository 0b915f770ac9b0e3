CREATE OR REPLACE FUNCTION lease.quarantine(lock_key text, operation text, detail text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    id bigint;
BEGIN
    PERFORM lease._require_serializable();
    INSERT INTO lease.quarantine (lock_key, operation, detail, stored_record)
    SELECT quarantine.lock_key, left(operation, 64), left(detail, 1024),
           (SELECT to_jsonb(l) FROM lease.locks l WHERE l.lock_key = quarantine.lock_key)
    ON CONFLICT (lock_key) WHERE resolved_at IS NULL DO NOTHING
    RETURNING quarantine_id INTO id;
    IF id IS NOT NULL THEN
        PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                             'target_lease_quarantine', 'lease_backend_unavailable',
                             jsonb_build_object('decision', 'error', 'priority', 'high',
                                                'reason', left(operation, 64) || ': '
                                                          || left(detail, 400)));
    ELSE
        SELECT q.quarantine_id INTO id FROM lease.quarantine q
         WHERE q.lock_key = quarantine.lock_key AND q.resolved_at IS NULL;
    END IF;
    RETURN id;
END
$function$;

COMMENT ON FUNCTION lease.quarantine(text,text,text) IS
    'Records a corrupt record seen by an operation (the operation itself raised LS001 and rolled back), once per open case, with a high-priority alert.';

REVOKE ALL ON FUNCTION lease.quarantine(text,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.quarantine(text,text,text) TO lease_service;
