CREATE OR REPLACE FUNCTION lease._id_ok(v jsonb)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN COALESCE(((jsonb_typeof(v) = 'string'::text) AND (length((v #>> '{}'::text[])) <= 128) AND ((v #>> '{}'::text[]) ~ '^[A-Za-z0-9._:-]+$'::text)), false);

COMMENT ON FUNCTION lease._id_ok(jsonb) IS
    'Identifier fields: 1..128 of [A-Za-z0-9._:-].';

REVOKE ALL ON FUNCTION lease._id_ok(jsonb) FROM PUBLIC;
