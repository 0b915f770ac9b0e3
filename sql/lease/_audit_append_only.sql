CREATE OR REPLACE FUNCTION lease._audit_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('lease.audit_purge', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'lease.audit_events is append-only (% refused)', TG_OP USING ERRCODE = 'LS004';
END
$function$;

COMMENT ON FUNCTION lease._audit_append_only() IS
    'Audit events are append-only: no UPDATE or TRUNCATE for anyone, DELETE only inside lease.purge_retention (which sets lease.audit_purge).';

REVOKE ALL ON FUNCTION lease._audit_append_only() FROM PUBLIC;
