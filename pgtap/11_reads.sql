-- Reads: inspect by identity and by lease id (live and terminal), the three
-- lists with stable keyset pagination, page size bounds, signed page tokens,
-- and the caller's scope, which no read crosses.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(55);

CREATE FUNCTION t.list_req(extra jsonb) RETURNS jsonb LANGUAGE sql VOLATILE
RETURN t.req(jsonb_build_object('scope', t.scope(), 'tenant_id', 'tenant-main', 'program_id', 'program-a') || extra);

-- leases: seven in program-a (two owners, two actors), two in program-b, one in another tenant
SET LOCAL ROLE lease_service;
SELECT t.acquire('t-a') AS l1 \gset
SELECT t.acquire('t-b') AS l2 \gset
SELECT t.acquire('t-c', jsonb_build_object('principal', t.principal('p2'))) AS l3 \gset
SELECT t.acquire('t-d', jsonb_build_object('lock_identity', t.ident('t-d', actor => 'scanner'))) AS l4 \gset
SELECT t.acquire('t-d') AS l5 \gset
SELECT t.acquire('t-e', jsonb_build_object('principal', t.principal('p2'),
                                           'lock_identity', t.ident('t-e', opclass => 'collect'))) AS l6 \gset
SELECT t.acquire('t-f', jsonb_build_object('lock_identity', t.ident('t-f', ns => 'other-ns'))) AS l7 \gset
SELECT t.acquire('t-a', jsonb_build_object('lock_identity', t.ident('t-a', program => 'program-b'))) AS b1 \gset
SELECT t.acquire('t-b', jsonb_build_object('lock_identity', t.ident('t-b', program => 'program-b'))) AS b2 \gset
SELECT t.acquire('t-a', jsonb_build_object('lock_identity', t.ident('t-a', tenant => 'tenant-other'))) AS o1 \gset
-- a terminal lease and an expired one in program-a
SELECT t.acquire('t-g') AS g1 \gset
SELECT is(lease.release(t.ref(:'g1'::jsonb)) ->> 'code', 'lease_released', 'fixture: release t-g');
SELECT t.acquire('t-h') AS h1 \gset
RESET ROLE;
SELECT t.expire(:'h1'::jsonb #>> '{lease,lease_id}') AS ignored \gset

-- inspect --------------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lock_identity', t.ident('t-a')))),
          jsonb_build_object('code', 'lease_inspected', 'lease', :'l1'::jsonb -> 'lease'),
          'inspect by identity answers the live lease');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lease_id', :'l1'::jsonb #>> '{lease,lease_id}'))),
          jsonb_build_object('code', 'lease_inspected', 'lease', :'l1'::jsonb -> 'lease'),
          'inspect by lease id answers the same record');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lease_id', :'g1'::jsonb #>> '{lease,lease_id}')))
            #>> '{lease,state}', 'released', 'inspect by lease id finds a terminal lease');
SELECT ok(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lease_id', :'g1'::jsonb #>> '{lease,lease_id}')))
            #>> '{lease,ended_at}' IS NOT NULL, 'with its ended_at');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lock_identity', t.ident('t-g')))),
          '{"code":"lease_not_found"}'::jsonb, 'inspect by identity after release: lease_not_found');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lock_identity', t.ident('t-none')))),
          '{"code":"lease_not_found"}'::jsonb, 'an identity that never had a lease: lease_not_found');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lease_id', 'lease_nope'))),
          '{"code":"lease_not_found"}'::jsonb, 'an unknown lease id: lease_not_found');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lease_id', :'h1'::jsonb #>> '{lease,lease_id}')))
            #>> '{lease,state}', 'expired', 'an expired unswept lease is reported expired');

-- inspect never crosses scope
CREATE TEMP TABLE oos (what text, r jsonb) ON COMMIT DROP;
INSERT INTO oos VALUES
  ('other program by identity', lease.inspect(t.req(jsonb_build_object('scope', t.scope(),
                                  'lock_identity', t.ident('t-a', program => 'program-b'))))),
  ('other program by lease id', lease.inspect(t.req(jsonb_build_object('scope', t.scope(),
                                  'lease_id', :'b1'::jsonb #>> '{lease,lease_id}')))),
  ('other tenant by identity', lease.inspect(t.req(jsonb_build_object('scope', t.scope(),
                                  'lock_identity', t.ident('t-a', tenant => 'tenant-other'))))),
  ('other tenant by lease id, program *', lease.inspect(t.req(jsonb_build_object('scope', t.scope('*'),
                                  'lease_id', :'o1'::jsonb #>> '{lease,lease_id}')))),
  ('actor outside the actor set', lease.inspect(t.req(jsonb_build_object('scope', t.scope('program-a', ARRAY['scanner']),
                                  'lease_id', :'l1'::jsonb #>> '{lease,lease_id}')))),
  ('terminal lease of an actor outside the set', lease.inspect(t.req(jsonb_build_object(
                                  'scope', t.scope('program-a', ARRAY['scanner']),
                                  'lease_id', :'g1'::jsonb #>> '{lease,lease_id}')))),
  ('terminal lease of another program', lease.inspect(t.req(jsonb_build_object('scope', t.scope('program-b'),
                                  'lease_id', :'g1'::jsonb #>> '{lease,lease_id}'))));
SELECT is(r, '{"code":"lease_not_found"}'::jsonb, 'out of scope (' || what || '): lease_not_found')
  FROM oos ORDER BY what;
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope('*'), 'lease_id', :'b1'::jsonb #>> '{lease,lease_id}')))
            #>> '{lease,lease_id}', :'b1'::jsonb #>> '{lease,lease_id}', 'program * sees every program of its tenant');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope('program-a', ARRAY['scanner']),
                                                 'lock_identity', t.ident('t-d', actor => 'scanner')))) #>> '{lease,lease_id}',
          :'l4'::jsonb #>> '{lease,lease_id}', 'an actor set sees its own actors');

-- inspect: request shape
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lock_identity', t.ident('a/b')))),
          '{"code":"invalid_lease_request","field":"lock_identity.target_id"}'::jsonb, 'a malformed identity');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lease_id', 'lease id'))),
          '{"code":"invalid_lease_request","field":"lease_id"}'::jsonb, 'a malformed lease id');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope()))),
          '{"code":"invalid_lease_request","field":"lock_identity"}'::jsonb, 'neither identity nor lease id');
SELECT is(lease.inspect(t.req(jsonb_build_object('scope', t.scope(), 'lock_identity', t.ident('t-a'),
                                                 'deadline_at', t.rfc3339(now() - interval '1 ms')))),
          '{"code":"deadline_exceeded"}'::jsonb, 'a passed deadline');
SELECT throws_ok(format('SELECT lease.inspect(%L::jsonb)', t.req(jsonb_build_object('lock_identity', t.ident('t-a')))),
                 'LS003', NULL, 'inspect without a scope is a malformed call');

-- list_by_program: every lease exactly once, in identity order, across pages --------------
CREATE TEMP TABLE pages ON COMMIT DROP AS
WITH RECURSIVE p(n, r) AS (
    SELECT 1, lease.list_by_program(t.list_req('{"page_size": 3}'))
    UNION ALL
    SELECT n + 1, lease.list_by_program(t.list_req(jsonb_build_object('page_size', 3,
                                                   'page_token', r ->> 'next_page_token')))
      FROM p WHERE r ->> 'next_page_token' IS NOT NULL AND n < 10)
SELECT n, r FROM p;
CREATE TEMP TABLE listed ON COMMIT DROP AS
SELECT p.n, e.i, e.l FROM pages p, jsonb_array_elements(p.r -> 'leases') WITH ORDINALITY e(l, i);

SELECT is((SELECT array_agg(jsonb_array_length(r -> 'leases') ORDER BY n) FROM pages), ARRAY[3, 3, 1],
          'seven leases in pages of 3, 3 and 1');
SELECT is((SELECT array_agg(r ->> 'code' ORDER BY n) FROM pages), ARRAY['lease_listed', 'lease_listed', 'lease_listed'],
          'every page answers lease_listed');
SELECT ok((SELECT bool_and((r ->> 'next_page_token' IS NULL) = (n = 3)) FROM pages),
          'only the last page has no next_page_token');
SELECT set_eq($$SELECT l ->> 'lease_id' FROM listed$$,
              ARRAY[:'l1'::jsonb #>> '{lease,lease_id}', :'l2'::jsonb #>> '{lease,lease_id}',
                    :'l3'::jsonb #>> '{lease,lease_id}', :'l4'::jsonb #>> '{lease,lease_id}',
                    :'l5'::jsonb #>> '{lease,lease_id}', :'l6'::jsonb #>> '{lease,lease_id}',
                    :'l7'::jsonb #>> '{lease,lease_id}'],
              'exactly the active leases of tenant-main/program-a (no terminal, expired or foreign one)');
SELECT is((SELECT count(DISTINCT l ->> 'lease_id')::int FROM listed), 7, 'each lease exactly once');
SELECT is((SELECT array_agg(l ->> 'lease_id' ORDER BY n, i) FROM listed),
          (SELECT array_agg(l ->> 'lease_id' ORDER BY l #>> '{lock_identity,target_namespace}',
                            l #>> '{lock_identity,target_id}', l #>> '{lock_identity,actor_name}',
                            l #>> '{lock_identity,workflow_name}', l #>> '{lock_identity,operation_class}')
             FROM listed),
          'pages follow the stable identity order');
SELECT is(lease.list_by_program(t.list_req('{"page_size": 3}')), (SELECT r FROM pages WHERE n = 1),
          'the same request answers the same page (stable)');
SELECT ok((SELECT bool_and(NOT (l ? 'lock_key')) FROM listed)
          AND (SELECT bool_and(position('starintel:target-lease' IN r::text) = 0) FROM pages),
          'no lock key appears in any page');
SELECT is(jsonb_array_length(lease.list_by_program(t.list_req('{}')) -> 'leases'), 7,
          'without page_size the default page holds them all');

-- page size bounds
SELECT is(lease.list_by_program(t.list_req('{"page_size": 0}')), '{"code":"invalid_lease_request","field":"page_size"}'::jsonb,
          'page_size 0 is invalid');
SELECT is(lease.list_by_program(t.list_req('{"page_size": 501}')) ->> 'field', 'page_size',
          'page_size above the server maximum (500) is invalid');
SELECT is(lease.list_by_program(t.list_req('{"page_size": 500}')) ->> 'code', 'lease_listed', 'page_size 500 is accepted');
SELECT is(lease.list_by_program(t.list_req('{"page_size": "3"}')) ->> 'field', 'page_size', 'a string page_size is invalid');
SELECT is(lease.list_by_program(t.list_req('{"page_size": 1}')) -> 'leases' -> 0 ->> 'lease_id',
          (SELECT l ->> 'lease_id' FROM listed WHERE n = 1 AND i = 1), 'page_size 1 answers the first lease');

-- page tokens are opaque, signed, and bound to their list
SELECT r ->> 'next_page_token' AS tok FROM pages WHERE n = 1 \gset
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('page_size', 3, 'page_token',
            left(:'tok', length(:'tok') - 1) || CASE WHEN right(:'tok', 1) = '0' THEN '1' ELSE '0' END))),
          '{"code":"invalid_lease_request","field":"page_token"}'::jsonb, 'a token with a changed signature is refused');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('page_size', 3, 'page_token',
            'A' || substr(:'tok', 2)))) ->> 'field', 'page_token', 'a token with a changed cursor is refused');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('page_size', 3, 'page_token', 'garbage'))) ->> 'field',
          'page_token', 'garbage is refused');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('page_size', 3, 'page_token', :'tok',
                                                              'program_id', 'program-b'))) ->> 'field',
          'page_token', 'a token of another program''s list is refused');
SELECT is(lease.list_by_target(t.list_req(jsonb_build_object('page_size', 3, 'page_token', :'tok',
                                                             'target_namespace', 'starintel-target',
                                                             'target_id', 't-d'))) ->> 'field',
          'page_token', 'a token of another kind of list is refused');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('page_size', 3, 'page_token', :'tok',
            'scope', t.scope('program-a', ARRAY['usernamegen'])))) ->> 'code',
          'lease_listed', 'a token stays usable under a narrower scope (the scope filters the page)');

-- scope in lists
SELECT is((SELECT array_agg(e ->> 'lease_id' ORDER BY e ->> 'lease_id')
             FROM jsonb_array_elements(lease.list_by_program(t.list_req(jsonb_build_object(
                    'scope', t.scope('program-a', ARRAY['scanner'])))) -> 'leases') e),
          ARRAY[:'l4'::jsonb #>> '{lease,lease_id}'], 'an actor set lists only its actors');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('program_id', 'program-b'))) -> 'leases',
          '[]'::jsonb, 'a program-a scope lists nothing of program-b');
SELECT is(jsonb_array_length(lease.list_by_program(t.list_req(jsonb_build_object('program_id', 'program-b',
            'scope', t.scope('*')))) -> 'leases'), 2, 'program * lists program-b');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('tenant_id', 'tenant-other', 'scope', t.scope('*'))))
            -> 'leases', '[]'::jsonb, 'program * never crosses the tenant');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('program_id', 'program-a',
            'scope', t.scope('program-a', ARRAY['*'], 'tenant-other')))) -> 'leases',
          '[]'::jsonb, 'a scope of another tenant lists nothing here');

-- list_by_owner and list_by_target
SELECT is((SELECT array_agg(e ->> 'lease_id' ORDER BY e ->> 'lease_id')
             FROM jsonb_array_elements(lease.list_by_owner(t.list_req('{"owner_principal_id": "p2"}')) -> 'leases') e),
          (SELECT array_agg(x ORDER BY x) FROM unnest(ARRAY[:'l3'::jsonb #>> '{lease,lease_id}',
                                                           :'l6'::jsonb #>> '{lease,lease_id}']) x),
          'list_by_owner lists the owner''s leases');
SELECT is(lease.list_by_owner(t.list_req('{"owner_principal_id": "bad owner"}')) ->> 'field', 'owner_principal_id',
          'list_by_owner needs a valid owner');
SELECT is((SELECT array_agg(e ->> 'lease_id' ORDER BY e #>> '{lock_identity,actor_name}')
             FROM jsonb_array_elements(lease.list_by_target(t.list_req(
                    '{"target_namespace": "starintel-target", "target_id": "t-d"}')) -> 'leases') e),
          ARRAY[:'l4'::jsonb #>> '{lease,lease_id}', :'l5'::jsonb #>> '{lease,lease_id}'],
          'list_by_target lists every actor''s lease of that target');
SELECT is(lease.list_by_target(t.list_req('{"target_namespace": "starintel-target", "target_id": "t-d", "page_size": 1}'))
            -> 'leases' -> 0 ->> 'lease_id', :'l4'::jsonb #>> '{lease,lease_id}', 'in identity order');
SELECT is(lease.list_by_target(t.list_req('{"target_namespace": "Bad NS", "target_id": "t-d"}')) ->> 'field',
          'target_namespace', 'list_by_target validates the namespace');
SELECT is(lease.list_by_program(t.list_req('{"tenant_id": "Bad Tenant"}')) ->> 'field', 'tenant_id',
          'lists validate the tenant');
SELECT is(lease.list_by_program(t.list_req(jsonb_build_object('deadline_at', t.rfc3339(now() - interval '1 ms')))),
          '{"code":"deadline_exceeded"}'::jsonb, 'lists honour the deadline');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
