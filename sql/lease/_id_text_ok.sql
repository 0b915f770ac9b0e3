CREATE OR REPLACE FUNCTION lease._id_text_ok(v text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(length(v) <= 128 AND v ~ '^[A-Za-z0-9._:-]+$', false);

COMMENT ON FUNCTION lease._id_text_ok(text) IS
    'An id as a typed argument (lease id, request id, principal, service instance): 1 to 128 of A-Z a-z 0-9 . _ : -, the rule lease._id_ok applies to a jsonb member''s text. False for NULL.';

REVOKE ALL ON FUNCTION lease._id_text_ok(text) FROM PUBLIC;
