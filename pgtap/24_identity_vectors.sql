-- Identity rules: every shared vector of tests/vectors/identity.json (the
-- same file tests/unit/test_identity_vectors.c runs through the C codec and
-- src/core/identity.c) through each SQL implementation of the rules:
-- lease.normalize_component (one component), lease._identity (names the
-- field), the canonical text the deciders compare (lease._canonical_of of
-- the normalised components) and lease.acquire. Each input is a
-- request's whole lock_identity value. tests/vectors/lock_keys.json
-- (pgtap/02_lock_keys.sql) adds the lock keys of whole tuples.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
\set vectors `cat tests/vectors/identity.json`

CREATE TABLE t.vec (kind text, n bigint, v jsonb);
INSERT INTO t.vec
SELECT 'accepted', n, v FROM jsonb_array_elements(:'vectors'::jsonb -> 'accepted') WITH ORDINALITY x(v, n)
UNION ALL
SELECT 'rejected', n, v FROM jsonb_array_elements(:'vectors'::jsonb -> 'rejected') WITH ORDINALITY x(v, n);
GRANT SELECT ON t.vec TO PUBLIC;

-- The component a rejected vector names, and its value when it is a string.
CREATE VIEW t.named AS
SELECT n, v, substr(v ->> 'field', length('lock_identity.') + 1) AS component,
       CASE WHEN jsonb_typeof(v -> 'input' -> substr(v ->> 'field', length('lock_identity.') + 1))
                 = 'string'
            THEN v -> 'input' ->> substr(v ->> 'field', length('lock_identity.') + 1) END AS value
  FROM t.vec WHERE kind = 'rejected' AND v ->> 'field' LIKE 'lock_identity.%';

SELECT plan(3 + 4 * (SELECT count(*)::int FROM t.vec WHERE kind = 'accepted')
              + 2 * (SELECT count(*)::int FROM t.vec WHERE kind = 'rejected')
              + (SELECT count(*)::int FROM t.named WHERE value IS NOT NULL));

SELECT cmp_ok((SELECT count(*)::int FROM t.vec WHERE kind = 'accepted'), '>=', 30,
              'the vector file has accepted vectors');
SELECT cmp_ok((SELECT count(*)::int FROM t.vec WHERE kind = 'rejected'), '>=', 100,
              'the vector file has rejected vectors');

-- accepted -----------------------------------------------------------------
SELECT is(to_jsonb(lease._identity(v -> 'input')),
          (v -> 'normalized') || '{"bad_field": null}',
          '_identity normalises #' || n || ' (' || (v ->> 'why') || ')')
  FROM t.vec WHERE kind = 'accepted' ORDER BY n;
SELECT is((SELECT lease._canonical_of(i.tenant_id, i.program_id, i.target_namespace, i.target_id,
                                      i.actor_name, i.workflow_name, i.operation_class)
             FROM lease._identity(v -> 'input') i),
          '["v1","' || (v #>> '{normalized,tenant_id}') || '","' || (v #>> '{normalized,program_id}')
          || '","' || (v #>> '{normalized,target_namespace}') || '","'
          || (v #>> '{normalized,target_id}') || '","' || (v #>> '{normalized,actor_name}')
          || '","' || (v #>> '{normalized,workflow_name}') || '","'
          || (v #>> '{normalized,operation_class}') || '"]',
          '_canonical_of of #' || n || ' is the normalised tuple')
  FROM t.vec WHERE kind = 'accepted' ORDER BY n;
SELECT is((SELECT jsonb_object_agg(f, lease.normalize_component(f, v -> 'input' ->> f))
             FROM unnest(ARRAY['tenant_id', 'program_id', 'target_namespace', 'target_id',
                               'actor_name', 'workflow_name', 'operation_class']) f),
          v -> 'normalized',
          'normalize_component gives each component of #' || n)
  FROM t.vec WHERE kind = 'accepted' ORDER BY n;

-- rejected -----------------------------------------------------------------
SELECT is(to_jsonb(lease._identity(v -> 'input')) ->> 'bad_field', v ->> 'field',
          '_identity rejects #' || n || ' (' || (v ->> 'why') || ') naming ' || (v ->> 'field'))
  FROM t.vec WHERE kind = 'rejected' ORDER BY n;
SELECT is(lease.normalize_component(component, value), NULL,
          'normalize_component refuses the ' || component || ' of #' || n)
  FROM t.named WHERE value IS NOT NULL ORDER BY n;

-- lease.acquire as a caller sends it ---------------------------------------
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE acq ON COMMIT DROP AS
SELECT kind, n, v, lease.acquire(t.acq('unused', jsonb_build_object('lock_identity', v -> 'input'))) AS r
  FROM t.vec ORDER BY kind, n;

SELECT ok(r ->> 'code' IN ('lease_acquired', 'lease_conflict')
          AND (r ->> 'code' = 'lease_conflict' OR r #> '{lease,lock_identity}' = v -> 'normalized'),
          'acquire accepts #' || n || ' and answers the normalised identity')
  FROM acq WHERE kind = 'accepted' ORDER BY n;
SELECT is(r, jsonb_build_object('code', 'invalid_lease_request', 'field', v ->> 'field'),
          'acquire rejects #' || n || ' naming ' || (v ->> 'field'))
  FROM acq WHERE kind = 'rejected' ORDER BY n;
RESET ROLE;

SELECT is((SELECT count(*)::int FROM lease.locks),
          (SELECT count(DISTINCT v -> 'normalized')::int FROM t.vec WHERE kind = 'accepted'),
          'one row per distinct normalised identity: rejected vectors added none');

SELECT * FROM finish();
ROLLBACK;
