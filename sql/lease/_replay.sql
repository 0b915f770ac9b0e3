CREATE OR REPLACE FUNCTION lease._replay(k text, op text, p jsonb)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
RETURN lease._replay_t(k, op, p #>> '{principal,principal_id}', p ->> 'request_id',
                       p ->> 'request_digest');

COMMENT ON FUNCTION lease._replay(text,text,jsonb) IS
    'lease._replay_t for a jsonb request (its principal, request id and digest): NULL when the request is new, the replayed result when the digest matches, idempotency_conflict when it does not. A SQL function, inlined where it is called.';

REVOKE ALL ON FUNCTION lease._replay(text,text,jsonb) FROM PUBLIC;
