CREATE OR REPLACE FUNCTION lease._sweep_lock() RETURNS boolean
LANGUAGE sql VOLATILE
RETURN pg_try_advisory_xact_lock(7809644177848592744);

COMMENT ON FUNCTION lease._sweep_lock() IS
    'One sweeper at a time across every leased instance.';

REVOKE ALL ON FUNCTION lease._sweep_lock() FROM PUBLIC;
