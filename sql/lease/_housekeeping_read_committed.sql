CREATE OR REPLACE FUNCTION lease._housekeeping_read_committed()
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'housekeeping steps run at READ COMMITTED, not %',
                        current_setting('transaction_isolation')
            USING ERRCODE = 'LS020',
                  HINT = 'BEGIN ISOLATION LEVEL READ COMMITTED; SELECT lease.expire_due(...); COMMIT';
    END IF;
END
$function$;

COMMENT ON FUNCTION lease._housekeeping_read_committed() IS
    'lease.expire_due and lease.purge_due run at READ COMMITTED: they take no predicate locks, so they never take part in a serialization failure of lease traffic (docs/architecture.md, "Readiness and background work").';

REVOKE ALL ON FUNCTION lease._housekeeping_read_committed() FROM PUBLIC;
