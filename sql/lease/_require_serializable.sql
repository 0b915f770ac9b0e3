CREATE OR REPLACE FUNCTION lease._require_serializable() RETURNS void
LANGUAGE sql VOLATILE
RETURN CASE WHEN current_setting('transaction_isolation') <> 'serializable'
            THEN lease._isolation_error() END;

COMMENT ON FUNCTION lease._require_serializable() IS
    'Refuses (LS002) to run outside SERIALIZABLE: every decision relies on it. One inlinable expression; only a failure calls the raiser.';

REVOKE ALL ON FUNCTION lease._require_serializable() FROM PUBLIC;
