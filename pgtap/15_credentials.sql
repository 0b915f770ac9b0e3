-- Credentials: only a digest of the secret is stored, listing never shows
-- it, lookups serve the service, program "*" and the administrative
-- capabilities need an administrator credential, bad input raises 22023.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(49);

CREATE FUNCTION t.cred(extra jsonb DEFAULT '{}') RETURNS jsonb LANGUAGE sql VOLATILE
RETURN jsonb_build_object('credential_id', 'key_' || translate(left(encode(sha256(convert_to(gen_random_uuid()::text, 'UTF8')), 'hex'), 26),
                                                                '0189', 'abcd'),
                          'principal_id', 'prn_worker_1', 'client_id', 'client_1', 'tenant_id', 'tenant-main',
                          'program_id', 'program-a', 'actor_names', '["usernamegen"]'::jsonb,
                          'capabilities', '["targets:lease", "targets:read"]'::jsonb,
                          'secret_digest', t.digest(), 'description', 'worker pool A')
       || extra;

-- create, as lease_admin ------------------------------------------------------------------
SET LOCAL ROLE lease_admin;
SELECT t.cred(jsonb_build_object('tenant_id', 'Tenant-Main', 'program_id', 'Program-A',
                                 'actor_names', '["UserNameGen", "scanner"]'::jsonb,
                                 'capabilities', '["targets:read", "targets:lease", "targets:read"]'::jsonb,
                                 'expires_at', t.rfc3339(now() + interval '30 days'))) AS c1 \gset
SELECT lease.credential_create(:'c1'::jsonb) AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb ->> 'credential_id', :'c1'::jsonb ->> 'credential_id', 'credential_create answers the id');
SELECT ok(NOT :'r1'::jsonb ? 'secret_digest' AND position(:'c1'::jsonb ->> 'secret_digest' IN :'r1') = 0,
          'the answer does not carry the digest');
SELECT is(ARRAY[:'r1'::jsonb ->> 'tenant_id', :'r1'::jsonb ->> 'program_id'], ARRAY['tenant-main', 'program-a'],
          'tenant and program are normalised');
SELECT is(:'r1'::jsonb -> 'actor_names', '["usernamegen", "scanner"]'::jsonb, 'actor names are normalised');
SELECT is(:'r1'::jsonb -> 'capabilities', '["targets:lease", "targets:read"]'::jsonb,
          'capabilities are de-duplicated and sorted');
SELECT is(:'r1'::jsonb ->> 'admin', 'false', 'not an administrator by default');
SELECT is((SELECT encode(secret_digest, 'hex') FROM lease.credentials WHERE credential_id = :'c1'::jsonb ->> 'credential_id'),
          :'c1'::jsonb ->> 'secret_digest', 'the stored secret material is the 32-byte digest only');
SELECT is_empty($$SELECT column_name FROM information_schema.columns
                   WHERE table_schema = 'lease' AND table_name = 'credentials'
                     AND column_name ~ 'secret' AND column_name <> 'secret_digest'$$,
                'there is no column for the secret itself');
SELECT is((SELECT ARRAY[event_type, priority, principal_class] FROM lease.audit_events WHERE event_type = 'credential_create'),
          ARRAY['credential_create', 'high', 'sql'], 'creation is audited with high priority');
SELECT is_empty(format($$SELECT 1 FROM lease.audit_events a WHERE position(%L IN a::text) > 0$$,
                       :'c1'::jsonb ->> 'secret_digest'), 'the audit event does not carry the digest');

-- lookup, as lease_service ------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT lease.credential_lookup(:'c1'::jsonb ->> 'credential_id') AS k1 \gset
SELECT is(:'k1'::jsonb ->> 'secret_digest', :'c1'::jsonb ->> 'secret_digest', 'lookup gives the service the digest to compare');
SELECT is(ARRAY[:'k1'::jsonb ->> 'principal_id', :'k1'::jsonb ->> 'client_id', :'k1'::jsonb ->> 'tenant_id',
                :'k1'::jsonb ->> 'program_id', :'k1'::jsonb ->> 'admin'],
          ARRAY['prn_worker_1', 'client_1', 'tenant-main', 'program-a', 'false'], 'lookup gives principal and scope');
SELECT ok(:'k1'::jsonb ->> 'revoked_at' IS NULL AND (:'k1'::jsonb ->> 'expires_at')::timestamptz > now(),
          'not revoked, expiring in the future');
SELECT is(lease.credential_lookup('key_aaaaaaaaaaaaaaaaaaaaaaaaaa'), NULL::jsonb, 'an unknown id looks up as NULL');
SELECT throws_ok($$SELECT lease.credential_list()$$, '42501', NULL, 'the service cannot list credentials');
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred()), '42501', NULL,
                 'the service cannot create credentials');
RESET ROLE;
SET LOCAL ROLE lease_operator;
SELECT throws_ok($$SELECT lease.credential_lookup('key_aaaaaaaaaaaaaaaaaaaaaaaaaa')$$, '42501', NULL,
                 'operators cannot look credentials up');
RESET ROLE;

-- administrators: program "*" and the administrative capabilities ------------------------------
SET LOCAL ROLE lease_admin;
SELECT t.cred(jsonb_build_object('program_id', '*', 'actor_names', '["*"]'::jsonb, 'admin', true,
    'capabilities', '["targets:force-release", "targets:revoke", "audit:read", "targets:read"]'::jsonb)) AS c2 \gset
SELECT is(lease.credential_create(:'c2'::jsonb) ->> 'program_id', '*', 'an administrator credential may name program *');
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred('{"program_id": "*"}')), '22023', NULL,
                 'program * without admin is refused');
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred('{"capabilities": ["targets:force-release"]}')),
                 '22023', NULL, 'targets:force-release without admin is refused');
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred('{"capabilities": ["targets:revoke"]}')),
                 '22023', NULL, 'targets:revoke without admin is refused');

-- validation ----------------------------------------------------------------------------------
CREATE TEMP TABLE badc (what text, c jsonb) ON COMMIT DROP;
INSERT INTO badc VALUES
  ('not an object', '[]'),
  ('credential id without prefix', t.cred('{"credential_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}')),
  ('credential id in upper case', t.cred('{"credential_id": "key_AAAAAAAAAAAAAAAAAAAAAAAAAA"}')),
  ('credential id too short', t.cred('{"credential_id": "key_aaaa"}')),
  ('principal id with a space', t.cred('{"principal_id": "a b"}')),
  ('missing client id', t.cred() - 'client_id'),
  ('bad tenant', t.cred('{"tenant_id": "tenant/x"}')),
  ('bad program', t.cred('{"program_id": ""}')),
  ('actor names not a list', t.cred('{"actor_names": "usernamegen"}')),
  ('no actor names', t.cred('{"actor_names": []}')),
  ('33 actor names', t.cred(jsonb_build_object('actor_names', (SELECT jsonb_agg('a' || g) FROM generate_series(1, 33) g)))),
  ('bad actor name', t.cred('{"actor_names": ["user gen"]}')),
  ('* with other actors', t.cred('{"actor_names": ["*", "usernamegen"]}')),
  ('capabilities not a list', t.cred('{"capabilities": "targets:lease"}')),
  ('unknown capability', t.cred('{"capabilities": ["targets:everything"]}')),
  ('admin not a boolean', t.cred('{"admin": "yes"}')),
  ('digest too short', t.cred('{"secret_digest": "abcd"}')),
  ('digest in upper case', t.cred(jsonb_build_object('secret_digest', upper(t.digest())))),
  ('description with a newline', t.cred(jsonb_build_object('description', E'a\nb'))),
  ('description of 257 characters', t.cred(jsonb_build_object('description', repeat('d', 257))));
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', c), '22023', NULL, 'invalid: ' || what)
  FROM badc ORDER BY what;
SELECT throws_ok(format('SELECT lease.credential_create(%L::jsonb)', t.cred(jsonb_build_object('credential_id',
                   :'c1'::jsonb ->> 'credential_id'))), '23505', NULL, 'a credential id is never reused');

-- list and revoke ------------------------------------------------------------------------------
SELECT lease.credential_list() AS l1 \gset
SELECT is(jsonb_array_length(:'l1'::jsonb), 2, 'credential_list lists both credentials');
SELECT ok(position('secret_digest' IN :'l1') = 0 AND position(:'c1'::jsonb ->> 'secret_digest' IN :'l1') = 0
          AND position(:'c2'::jsonb ->> 'secret_digest' IN :'l1') = 0, 'the list never shows a digest');
SELECT is(lease.credential_revoke(:'c1'::jsonb ->> 'credential_id'), true, 'credential_revoke revokes');
SELECT is(lease.credential_revoke(:'c1'::jsonb ->> 'credential_id'), false, 'revoking again changes nothing');
SELECT is(lease.credential_revoke('key_aaaaaaaaaaaaaaaaaaaaaaaaaa'), false, 'revoking an unknown id: false');
RESET ROLE;
SET LOCAL ROLE lease_service;
SELECT is((lease.credential_lookup(:'c1'::jsonb ->> 'credential_id') ->> 'revoked_at')::timestamptz,
          date_trunc('milliseconds', now()), 'the lookup shows the revocation time');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM lease.audit_events WHERE event_type = 'credential_revoke' AND priority = 'high'), 1,
          'one high-priority revoke event');

SELECT * FROM finish();
ROLLBACK;
