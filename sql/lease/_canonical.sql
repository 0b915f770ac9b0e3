CREATE OR REPLACE FUNCTION lease._canonical(li jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN lease._identity_ok(li) THEN lease._canonical_text(li) END;

COMMENT ON FUNCTION lease._canonical(jsonb) IS
    'The canonical identity, or NULL when the object is not valid.';

REVOKE ALL ON FUNCTION lease._canonical(jsonb) FROM PUBLIC;
