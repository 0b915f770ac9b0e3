CREATE OR REPLACE FUNCTION lease._corrupt(lock_key text, what text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'corrupt lease record: %', what
        USING ERRCODE = 'LS001', DETAIL = 'lock_key=' || lock_key,
              HINT = 'call lease.quarantine(lock_key, operation, detail); see docs/operators.md';
END
$function$;

COMMENT ON FUNCTION lease._corrupt(text,text) IS
    'Fails closed on a stored record that does not match the request.';

REVOKE ALL ON FUNCTION lease._corrupt(text,text) FROM PUBLIC;
