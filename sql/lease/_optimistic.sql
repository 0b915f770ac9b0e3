CREATE OR REPLACE FUNCTION lease._optimistic(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'optimistic' = 'true'::jsonb, false);

COMMENT ON FUNCTION lease._optimistic(jsonb) IS
    'Whether the caller asked to skip the request-id lookup before a state-changing decision (the service sends it): a repeated request then collides on lease.idempotency''s primary key (23505) and is repeated without the flag to get the stored answer. The lookup of an absent key is a predicate-locking read that tied SERIALIZABLE transactions on different identities together.';

REVOKE ALL ON FUNCTION lease._optimistic(jsonb) FROM PUBLIC;
