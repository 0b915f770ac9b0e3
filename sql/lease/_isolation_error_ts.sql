CREATE OR REPLACE FUNCTION lease._isolation_error_ts()
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM lease._isolation_error();
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION lease._isolation_error_ts() IS
    'lease._isolation_error where a timestamptz is expected (lease._call_deadline): raisers typed like their context keep the caller one inlinable expression.';

REVOKE ALL ON FUNCTION lease._isolation_error_ts() FROM PUBLIC;
