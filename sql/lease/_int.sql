CREATE OR REPLACE FUNCTION lease._int(v jsonb)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN ((jsonb_typeof(v) = 'number'::text) AND (length((v #>> '{}'::text[])) <= 19) AND ((v #>> '{}'::text[]) ~ '^-?[0-9]+$'::text)) THEN ((v #>> '{}'::text[]))::bigint ELSE NULL::bigint END;

COMMENT ON FUNCTION lease._int(jsonb) IS
    'A JSON integer in bigint range, or NULL.';

REVOKE ALL ON FUNCTION lease._int(jsonb) FROM PUBLIC;
