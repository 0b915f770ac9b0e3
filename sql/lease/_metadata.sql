CREATE OR REPLACE FUNCTION lease._metadata(p jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(p -> 'metadata') = 'object' THEN p -> 'metadata' ELSE '{}' END;

COMMENT ON FUNCTION lease._metadata(jsonb) IS
    'The metadata object to store (absent: empty; lease._bad_metadata has refused anything else that is not an object).';

REVOKE ALL ON FUNCTION lease._metadata(jsonb) FROM PUBLIC;
