CREATE OR REPLACE FUNCTION lease._brief(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'brief' = 'true'::jsonb, false);

COMMENT ON FUNCTION lease._brief(jsonb) IS
    'Whether the caller asked for the short answer ("brief": true, what the service sends): the decision is the same, only the JSON built for the answer is smaller.';

REVOKE ALL ON FUNCTION lease._brief(jsonb) FROM PUBLIC;
