CREATE OR REPLACE FUNCTION lease._metadata(p jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(p -> 'metadata') = 'object' THEN p -> 'metadata' ELSE '{}' END;

COMMENT ON FUNCTION lease._metadata(jsonb) IS
    'The metadata object to store (absent or null: empty).';

REVOKE ALL ON FUNCTION lease._metadata(jsonb) FROM PUBLIC;
