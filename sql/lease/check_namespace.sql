CREATE OR REPLACE FUNCTION lease.check_namespace()
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease.check_namespace(NULL, NULL, NULL);
END
$function$;

COMMENT ON FUNCTION lease.check_namespace() IS
    'Whether this database may decide for its namespace (the namespace guard): with a position to compare (the service, which knows the last WAL position it saw) or without (psql, operators). Seals the namespace when it may not.';

REVOKE ALL ON FUNCTION lease.check_namespace() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.check_namespace() TO lease_service;
GRANT EXECUTE ON FUNCTION lease.check_namespace() TO lease_admin;


CREATE OR REPLACE FUNCTION lease.check_namespace(seen_epoch integer, seen_timeline integer, seen_wal_lsn pg_lsn)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    ns lease.namespace_state;
    pol lease.policy;
    recorded boolean := false;
BEGIN
    PERFORM lease._require_serializable();
    SELECT * INTO ns FROM lease.namespace_state;
    SELECT * INTO pol FROM lease.policy;
    IF NOT ns.sealed AND seen_epoch = ns.epoch AND seen_timeline = lease._insert_timeline()
       AND pg_current_wal_lsn() < seen_wal_lsn THEN
        PERFORM lease._seal('the WAL insert position ' || pg_current_wal_lsn()
                            || ' is behind the ' || seen_wal_lsn
                            || ' seen on the same timeline (an older copy of the database was restored)');
    ELSIF NOT ns.sealed AND ns.timeline_id IS NULL THEN
        PERFORM lease._record_namespace();
        recorded := true;
    ELSE
        PERFORM lease._namespace_refusal(ns, pol);
    END IF;
    SELECT * INTO ns FROM lease.namespace_state;
    RETURN jsonb_build_object('checked', true, 'sealed', ns.sealed, 'sealed_reason',
                              ns.sealed_reason, 'epoch', ns.epoch,
                              'timeline', lease._insert_timeline(),
                              'wal_lsn', pg_current_wal_lsn()::text)
           || CASE WHEN recorded THEN '{"recorded": true}'::jsonb ELSE '{}'::jsonb END;
END
$function$;

COMMENT ON FUNCTION lease.check_namespace(integer,integer,pg_lsn) IS
    'Whether this database may decide for its namespace (the namespace guard): with a position to compare (the service, which knows the last WAL position it saw) or without (psql, operators). Seals the namespace when it may not.';

REVOKE ALL ON FUNCTION lease.check_namespace(integer,integer,pg_lsn) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.check_namespace(integer,integer,pg_lsn) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.check_namespace(integer,integer,pg_lsn) TO lease_admin;
