-- The function and view definitions of sql/ (leasectl migrate applies them
-- after the numbered migrations and records each in
-- lease.schema_repeatables): every function and view says what it decides
-- and why (COMMENT, shown by \df+ and \dv+), each applied definition is
-- recorded with its SHA-256, and the record is readable by operators only.
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT plan(8);

SELECT is((SELECT count(*)::int FROM pg_proc p
            WHERE p.pronamespace = 'lease'::regnamespace
              AND coalesce(obj_description(p.oid, 'pg_proc'), '') = ''), 0,
          'every function in schema lease has a comment');
SELECT cmp_ok((SELECT count(*)::int FROM pg_proc p WHERE p.pronamespace = 'lease'::regnamespace),
              '>', 100, 'the schema holds the functions (the comment check is not vacuous)');
SELECT is((SELECT count(*)::int FROM pg_class c
            WHERE c.relnamespace = 'lease'::regnamespace AND c.relkind = 'v'
              AND coalesce(obj_description(c.oid, 'pg_class'), '') = ''), 0,
          'every view in schema lease has a comment');
SELECT is((SELECT count(*)::int FROM lease.schema_repeatables
            WHERE checksum !~ '^[0-9a-f]{64}$' OR name !~ '^[a-z_]+/[a-z0-9_]+\.sql$'), 0,
          'every recorded definition has a file name and a SHA-256');
SELECT is((SELECT count(*)::int FROM lease.schema_repeatables WHERE name = 'lease/acquire.sql'), 1,
          'lease.acquire''s file is recorded');
SELECT ok(has_table_privilege('lease_operator', 'lease.schema_repeatables', 'SELECT'),
          'operators read which definitions are applied');
SELECT ok(NOT has_table_privilege('lease_service', 'lease.schema_repeatables', 'SELECT')
          AND NOT has_table_privilege('lease_operator', 'lease.schema_repeatables', 'INSERT'),
          'nobody but the owner changes the record');
SELECT is((SELECT count(*)::int FROM pg_proc p
            WHERE p.pronamespace = 'lease'::regnamespace AND p.prosecdef
              AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp']), 0,
          'every SECURITY DEFINER function pins its search_path');

SELECT * FROM finish();
ROLLBACK;
