CREATE OR REPLACE FUNCTION lease._require_read_committed()
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'outbox relay functions run at READ COMMITTED, not %',
                        current_setting('transaction_isolation')
            USING ERRCODE = 'LS020',
                  HINT = 'BEGIN ISOLATION LEVEL READ COMMITTED; then claim, publish, mark, COMMIT';
    END IF;
END
$function$;

COMMENT ON FUNCTION lease._require_read_committed() IS
    'The relay runs at READ COMMITTED: a row another relay published after this transaction began is re-read under its lock instead of failing with 40001, and the relay''s reads add no predicate locks to the SERIALIZABLE commits that insert outbox rows.';

REVOKE ALL ON FUNCTION lease._require_read_committed() FROM PUBLIC;
