CREATE OR REPLACE FUNCTION lease._audit_reason_clean()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    NEW.reason := lease._audit_clean(NEW.reason);
    RETURN NEW;
END
$function$;

COMMENT ON FUNCTION lease._audit_reason_clean() IS
    'Trigger on lease.audit_events: replaces the control and bidirectional-formatting characters of a reason (lease._audit_clean) before the row is stored, whatever path wrote it, so an audit reason shown to people cannot forge lines or reorder text.';

REVOKE ALL ON FUNCTION lease._audit_reason_clean() FROM PUBLIC;
