-- Canonical identity and lock keys: every shared vector of
-- tests/vectors/lock_keys.json (the same file the C unit tests read) through
-- lease.lock_key and through lease.acquire, plus docs/contract.md's golden vector.
-- The plan is computed from the file, so a new vector is a new test.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
\set vectors `cat tests/vectors/lock_keys.json`

CREATE TABLE t.vec (kind text, n bigint, v jsonb);
INSERT INTO t.vec
SELECT 'accepted', n, v FROM jsonb_array_elements(:'vectors'::jsonb -> 'accepted') WITH ORDINALITY x(v, n)
UNION ALL
SELECT 'rejected', n, v FROM jsonb_array_elements(:'vectors'::jsonb -> 'rejected') WITH ORDINALITY x(v, n);
GRANT SELECT ON t.vec TO PUBLIC;

-- accepted: lock_key equals, acquire stores that key and the normalised tuple
-- rejected: lock_key throws 22023, acquire answers invalid_lease_request + field
SELECT plan(8 + 2 * (SELECT count(*)::int FROM t.vec));

SELECT cmp_ok((SELECT count(*)::int FROM t.vec WHERE kind = 'accepted'), '>=', 20,
              'the vector file has accepted vectors');
SELECT cmp_ok((SELECT count(*)::int FROM t.vec WHERE kind = 'rejected'), '>=', 40,
              'the vector file has rejected vectors');

SET LOCAL ROLE lease_service;

-- The golden vector of docs/contract.md ("Identity and lock keys").
SELECT is(lease.lock_key('tenant-main', 'program-a', 'starintel-target', 'target_01',
                         'usernamegen', 'default', 'default'),
          'starintel:target-lease:v1:6UMHT_RTstSuGcqfVUzB0pc9lxli2lxUAbN_RNKMpBY',
          'golden vector of docs/contract.md');
SELECT is(lease.lock_key('tenant-main', 'program-a', 'starintel-target', 'target_01',
                         'usernamegen', 'default'),
          'starintel:target-lease:v1:6UMHT_RTstSuGcqfVUzB0pc9lxli2lxUAbN_RNKMpBY',
          'operation_class defaults to default');
SELECT is(lease.lock_key('tenant-main', 'program-a', 'starintel-target', 'target_01',
                         'usernamegen', 'default', NULL),
          'starintel:target-lease:v1:6UMHT_RTstSuGcqfVUzB0pc9lxli2lxUAbN_RNKMpBY',
          'a NULL operation_class is the absent value default');
SELECT isnt(lease.lock_key('tenant-main', 'program-a', 'starintel-target', 'target_01',
                           'usernamegen', 'default', 'collect'),
            lease.lock_key('tenant-main', 'program-a', 'starintel-target', 'target_01',
                           'usernamegen', 'default', 'default'),
            'operation classes do not collide');

-- lease.lock_key over every vector.
SELECT is(lease.lock_key(v #>> '{input,tenant_id}', v #>> '{input,program_id}',
                         v #>> '{input,target_namespace}', v #>> '{input,target_id}',
                         v #>> '{input,actor_name}', v #>> '{input,workflow_name}',
                         v #>> '{input,operation_class}'),
          v ->> 'key', 'lock_key accepted #' || n)
  FROM t.vec WHERE kind = 'accepted' ORDER BY n;

SELECT throws_ok(format('SELECT lease.lock_key(%L, %L, %L, %L, %L, %L, %L)',
                        v #>> '{input,tenant_id}', v #>> '{input,program_id}',
                        v #>> '{input,target_namespace}', v #>> '{input,target_id}',
                        v #>> '{input,actor_name}', v #>> '{input,workflow_name}',
                        coalesce(v #>> '{input,operation_class}',
                                 CASE WHEN v -> 'input' ? 'operation_class' THEN NULL
                                      ELSE 'default' END)),
                 '22023', NULL,
                 'lock_key rejects #' || n || ' (' || (v ->> 'field') || ': ' || (v ->> 'why') || ')')
  FROM t.vec WHERE kind = 'rejected' ORDER BY n;

-- lease.acquire over every vector: the request's lock_identity is the raw input.
CREATE TEMP TABLE acq ON COMMIT DROP AS
SELECT kind, n, v, lease.acquire(t.acq('unused', jsonb_build_object('lock_identity', v -> 'input'))) AS r
  FROM t.vec ORDER BY kind, n;

SELECT ok(r ->> 'code' IN ('lease_acquired', 'lease_conflict')
          AND (r ->> 'code' = 'lease_conflict' OR r #> '{lease,lock_identity}' = v -> 'normalized'),
          'acquire accepts #' || n || ' and answers the normalised identity')
  FROM acq WHERE kind = 'accepted' ORDER BY n;

SELECT is(r, jsonb_build_object('code', 'invalid_lease_request',
                                'field', 'lock_identity.' || (v ->> 'field')),
          'acquire rejects #' || n || ' naming lock_identity.' || (v ->> 'field'))
  FROM acq WHERE kind = 'rejected' ORDER BY n;

RESET ROLE;

-- The key acquire stored is the vector's key, next to the normalised tuple;
-- rejected vectors created nothing.
SELECT is((SELECT count(*)::int FROM t.vec x
            WHERE kind = 'accepted'
              AND NOT EXISTS (SELECT 1 FROM lease.locks l
                               WHERE l.lock_key = x.v ->> 'key'
                                 AND l.tenant_id = x.v #>> '{normalized,tenant_id}'
                                 AND l.program_id = x.v #>> '{normalized,program_id}'
                                 AND l.target_namespace = x.v #>> '{normalized,target_namespace}'
                                 AND l.target_id = x.v #>> '{normalized,target_id}'
                                 AND l.actor_name = x.v #>> '{normalized,actor_name}'
                                 AND l.workflow_name = x.v #>> '{normalized,workflow_name}'
                                 AND l.operation_class = x.v #>> '{normalized,operation_class}')),
          0, 'every accepted vector is stored under its key with its normalised tuple');
SELECT is((SELECT count(*)::int FROM lease.locks),
          (SELECT count(DISTINCT v ->> 'key')::int FROM t.vec WHERE kind = 'accepted'),
          'one row per distinct key: equivalent inputs share one identity, rejected ones add none');

SELECT * FROM finish();
ROLLBACK;
