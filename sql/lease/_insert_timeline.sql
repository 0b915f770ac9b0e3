CREATE OR REPLACE FUNCTION lease._insert_timeline() RETURNS integer
LANGUAGE sql VOLATILE
RETURN ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::integer;

COMMENT ON FUNCTION lease._insert_timeline() IS
    'The timeline new WAL is written on. Unlike pg_control_checkpoint(), it changes at the moment of promotion. Raises during recovery (a standby decides nothing anyway).';

REVOKE ALL ON FUNCTION lease._insert_timeline() FROM PUBLIC;
