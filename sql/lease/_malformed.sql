CREATE OR REPLACE FUNCTION lease._malformed(what text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'malformed lease call: %', what USING ERRCODE = 'LS003';
END
$function$;

COMMENT ON FUNCTION lease._malformed(text) IS
    'Raised for requests the service should never send (a bug, not user input).';

REVOKE ALL ON FUNCTION lease._malformed(text) FROM PUBLIC;
