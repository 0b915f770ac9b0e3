CREATE OR REPLACE FUNCTION lease._identity_of(c text) RETURNS lease.identity
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ROW(split_part(c, '"', 4), split_part(c, '"', 6), split_part(c, '"', 8),
           split_part(c, '"', 10), split_part(c, '"', 12), split_part(c, '"', 14),
           split_part(c, '"', 16), NULL)::lease.identity;

COMMENT ON FUNCTION lease._identity_of(text) IS
    'The identity of a canonical array (its components are between quotes).';

REVOKE ALL ON FUNCTION lease._identity_of(text) FROM PUBLIC;
