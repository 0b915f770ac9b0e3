CREATE OR REPLACE FUNCTION lease._key_of(c text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 'starintel:target-lease:v1:'
    || rtrim(translate(encode(sha256(convert_to(c, 'UTF8')), 'base64'), '+/', '-_'), '=');

COMMENT ON FUNCTION lease._key_of(text) IS
    'The lock key of a canonical identity (STABLE like convert_to, so that it inlines).';

REVOKE ALL ON FUNCTION lease._key_of(text) FROM PUBLIC;
