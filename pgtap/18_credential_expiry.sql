-- Credential expiry (migration 0015): a timestamp compared with backend
-- time. Every past instant (the epoch, -infinity) looks up as expired
-- (expires_in_ms 0), no expiry as NULL, a future one as the milliseconds
-- left; an expiry from year 10000 on (+infinity included) is refused with
-- 22023 at creation and on any later write; revocation is a boolean.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(17);

CREATE FUNCTION t.cred(expires_at text) RETURNS jsonb LANGUAGE sql VOLATILE
RETURN jsonb_build_object('credential_id', 'key_' || translate(left(encode(sha256(convert_to(gen_random_uuid()::text, 'UTF8')), 'hex'), 26),
                                                                '0189', 'abcd'),
                          'principal_id', 'prn_worker_1', 'client_id', 'client_1', 'tenant_id', 'tenant-main',
                          'program_id', 'program-a', 'actor_names', '["*"]'::jsonb,
                          'capabilities', '["targets:lease"]'::jsonb, 'secret_digest', t.digest(),
                          'expires_at', expires_at);

-- created as lease_admin, looked up as lease_service
CREATE FUNCTION t.created_lookup(expires_at text) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    id text;
BEGIN
    SET LOCAL ROLE lease_admin;
    id := lease.credential_create(t.cred(expires_at)) ->> 'credential_id';
    SET LOCAL ROLE lease_service;
    RETURN lease.credential_lookup(id);
END
$$;

SELECT t.created_lookup('1970-01-01T00:00:00Z') AS epoch \gset
RESET ROLE;
SELECT is(:'epoch'::jsonb -> 'expires_in_ms', '0'::jsonb, 'the epoch is an expiry in the past, not "never"');
SELECT t.created_lookup('-infinity') AS minus_inf \gset
RESET ROLE;
SELECT is(:'minus_inf'::jsonb -> 'expires_in_ms', '0'::jsonb, '-infinity is expired');
SELECT t.created_lookup(t.rfc3339(now() - interval '1 millisecond')) AS just_past \gset
RESET ROLE;
SELECT is(:'just_past'::jsonb -> 'expires_in_ms', '0'::jsonb, 'one millisecond ago is expired');
SELECT t.created_lookup(t.rfc3339(now())) AS at_now \gset
RESET ROLE;
SELECT is(:'at_now'::jsonb -> 'expires_in_ms', '0'::jsonb, 'an expiry at backend now is expired');
SELECT t.created_lookup(t.rfc3339(now() + interval '1 hour')) AS hour \gset
RESET ROLE;
SELECT ok((:'hour'::jsonb ->> 'expires_in_ms')::bigint BETWEEN 3599000 AND 3600000,
          'an hour ahead: the milliseconds left at backend time');
SELECT t.created_lookup(NULL) AS never \gset
RESET ROLE;
SELECT is(:'never'::jsonb -> 'expires_in_ms', 'null'::jsonb, 'no expiry: expires_in_ms is null');
SELECT is(:'never'::jsonb -> 'revoked', 'false'::jsonb, 'not revoked');
SELECT t.created_lookup('9999-12-31T23:59:59.999Z') AS last \gset
RESET ROLE;
SELECT ok((:'last'::jsonb ->> 'expires_in_ms')::bigint > 0, 'the last instant of year 9999 is accepted');

-- out of range: refused at creation with 22023, nothing stored
SELECT count(*) AS before FROM lease.credentials \gset
SET LOCAL ROLE lease_admin;
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred('294276-01-01T00:00:00Z')),
                 '22023', 'expires_at out of range: it must be before 10000-01-01T00:00:00Z',
                 'year 294276 is refused');
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred('infinity')),
                 '22023', NULL, '+infinity is refused');
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred('10000-01-01T00:00:00Z')),
                 '22023', NULL, 'the first instant of year 10000 is refused');
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred('not a time')),
                 '22007', NULL, 'a malformed expiry is refused');
RESET ROLE;
SELECT is((SELECT count(*) FROM lease.credentials), :'before'::bigint, 'the refusals stored nothing');
-- a write around credential_create is held to the same range
SELECT throws_ok(format($$UPDATE lease.credentials SET expires_at = 'infinity' WHERE credential_id = %L$$,
                        :'never'::jsonb ->> 'credential_id'),
                 '22023', NULL, 'an UPDATE to +infinity is refused too');

-- revocation is a flag of its own
SET LOCAL ROLE lease_admin;
SELECT is(lease.credential_revoke(:'never'::jsonb ->> 'credential_id'), true, 'revoked');
SET LOCAL ROLE lease_service;
SELECT lease.credential_lookup(:'never'::jsonb ->> 'credential_id') AS revoked \gset
RESET ROLE;
SELECT is(:'revoked'::jsonb -> 'revoked', 'true'::jsonb, 'the lookup says revoked');
-- the lookup's remaining time is backend time, whatever the client's clock
SELECT is(lease._credential_expires_in_ms(now() + interval '2 seconds'), 2000::bigint,
          'expires_in_ms counts from backend now');

SELECT * FROM finish();
ROLLBACK;
