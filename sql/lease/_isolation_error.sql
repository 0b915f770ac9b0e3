CREATE OR REPLACE FUNCTION lease._isolation_error()
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'lease functions run only at SERIALIZABLE isolation (this transaction is %)',
        current_setting('transaction_isolation')
        USING ERRCODE = 'LS002',
              HINT = 'ALTER ROLE <login role> SET default_transaction_isolation = ''serializable''';
END
$function$;

COMMENT ON FUNCTION lease._isolation_error() IS
    'Refuses to run outside SERIALIZABLE: every decision relies on it. The check is an inlinable expression; only a failure calls the raiser.';

REVOKE ALL ON FUNCTION lease._isolation_error() FROM PUBLIC;
