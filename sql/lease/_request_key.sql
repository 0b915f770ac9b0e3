CREATE OR REPLACE FUNCTION lease._request_key(k text, op text, principal_id text, request_id text)
RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN md5(k || op || length(principal_id)::text || ':' || principal_id || request_id)::uuid;

COMMENT ON FUNCTION lease._request_key(text,text,text,text) IS
    'The key of an idempotency record (lease.idempotency_keys'' primary key, migration 0027): the MD5 of lock key, operation, owner principal and request id, as a uuid (16 bytes; the four columns took about 171 bytes an index entry). The lock key is 64 hex digits and the principal is length-prefixed, so no two keys share a text. A SQL function, inlined where it is called.';

REVOKE ALL ON FUNCTION lease._request_key(text,text,text,text) FROM PUBLIC;
