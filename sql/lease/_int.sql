CREATE OR REPLACE FUNCTION lease._int(v jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(v) = 'number' AND length(v #>> '{}') <= 19
                 AND (v #>> '{}') ~ '^-?[0-9]+$'
            THEN (v #>> '{}')::bigint END;

COMMENT ON FUNCTION lease._int(jsonb) IS
    'A JSON integer in bigint range, or NULL.';

REVOKE ALL ON FUNCTION lease._int(jsonb) FROM PUBLIC;
