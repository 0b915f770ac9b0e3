CREATE OR REPLACE FUNCTION lease._malformed_ts(what text)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM lease._malformed(what);
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION lease._malformed_ts(text) IS
    'lease._malformed where a timestamptz is expected (lease._call_deadline): a typed raiser keeps the caller one inlinable expression.';

REVOKE ALL ON FUNCTION lease._malformed_ts(text) FROM PUBLIC;
