CREATE OR REPLACE FUNCTION lease._row(k text, i lease.identity)
 RETURNS lease.locks
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    l lease.locks;
BEGIN
    SELECT * INTO l FROM lease.locks WHERE lock_key = k;
    IF FOUND AND (NOT lease._same_identity(l, i) OR l.record_version <> 1) THEN
        PERFORM lease._corrupt(k, 'stored identity tuple or record version does not match');
    END IF;
    RETURN l;
END
$function$;

COMMENT ON FUNCTION lease._row(text,lease.identity) IS
    'The identity''s row, with its stored tuple checked against the request (fails closed with LS001 on mismatch or an unknown record version). Returns a row of NULLs when the identity has no row yet.';

REVOKE ALL ON FUNCTION lease._row(text,lease.identity) FROM PUBLIC;
