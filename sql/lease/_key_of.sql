CREATE OR REPLACE FUNCTION lease._key_of(c text)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN ('starintel:target-lease:v1:'::text || rtrim(translate(encode(sha256(convert_to(c, 'UTF8'::name)), 'base64'::text), '+/'::text, '-_'::text), '='::text));

COMMENT ON FUNCTION lease._key_of(text) IS
    'The lock key of a canonical identity (STABLE like convert_to, so that it inlines).';

REVOKE ALL ON FUNCTION lease._key_of(text) FROM PUBLIC;
