CREATE OR REPLACE FUNCTION lease._fold(v text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN lower(v COLLATE "C");

COMMENT ON FUNCTION lease._fold(text) IS
    'ASCII-only case folding: lower() would follow the database locale (Turkish dotless i), and the rules fold ASCII letters only.';

REVOKE ALL ON FUNCTION lease._fold(text) FROM PUBLIC;
