CREATE OR REPLACE FUNCTION lease._optimistic(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'optimistic' = 'true'::jsonb, false);

COMMENT ON FUNCTION lease._optimistic(jsonb) IS
    'Unused: no decision reads the "optimistic" request flag any more (every caller gets the same decision: the request id is looked up only after a conflict). Kept for the callers of older schemas until a numbered migration drops it.';

REVOKE ALL ON FUNCTION lease._optimistic(jsonb) FROM PUBLIC;
