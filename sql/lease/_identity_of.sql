CREATE OR REPLACE FUNCTION lease._identity_of(c text)
 RETURNS lease.identity
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN ROW(split_part(c, '"'::text, 4), split_part(c, '"'::text, 6), split_part(c, '"'::text, 8), split_part(c, '"'::text, 10), split_part(c, '"'::text, 12), split_part(c, '"'::text, 14), split_part(c, '"'::text, 16), NULL::text)::lease.identity;

COMMENT ON FUNCTION lease._identity_of(text) IS
    'The identity of a canonical array (its components are between quotes).';

REVOKE ALL ON FUNCTION lease._identity_of(text) FROM PUBLIC;
