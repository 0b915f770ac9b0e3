CREATE OR REPLACE FUNCTION lease._record_namespace()
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE lease.namespace_state
       SET system_identifier = lease._system_identifier(),
           timeline_id = lease._insert_timeline(),
           relation_oid = 'lease.namespace_state'::regclass::oid,
           checked_at = lease._now();
END
$function$;

COMMENT ON FUNCTION lease._record_namespace() IS
    'Records this database as the namespace''s (first use, or after recovery).';

REVOKE ALL ON FUNCTION lease._record_namespace() FROM PUBLIC;
