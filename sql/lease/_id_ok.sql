CREATE OR REPLACE FUNCTION lease._id_ok(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(jsonb_typeof(v) = 'string' AND length(v #>> '{}') <= 128
                AND (v #>> '{}') ~ '^[A-Za-z0-9._:-]+$', false);

COMMENT ON FUNCTION lease._id_ok(jsonb) IS
    'Identifier fields: 1..128 of [A-Za-z0-9._:-].';

REVOKE ALL ON FUNCTION lease._id_ok(jsonb) FROM PUBLIC;
