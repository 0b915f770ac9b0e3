-- The request-field helpers every operation runs, case by case: lease._id_ok
-- (identifiers: 1..128 of [A-Za-z0-9._:-], strings only), lease._int (a JSON
-- integer in bigint range; the TTL rule built on it lives in the deciders,
-- lease.acquire_brief_typed and lease._renew_t, pinned by pgtap/34 and 36). Their
-- formulas were rewritten to cost fewer instructions (docs/benchmarks.md,
-- "SQL hot path cuts"); these cases pin the rules at their edges, where a
-- cheaper formula could differ (a JSON text instead of jsonb_typeof, one
-- lease._int instead of three, a policy maximum at bigint's top).
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(38);

-- lease._id_ok -----------------------------------------------------------------
SELECT is(lease._id_ok(v), want, '_id_ok(' || coalesce(v::text, 'SQL NULL') || ') is ' || want)
  FROM (VALUES
    ('"a"'::jsonb, true),
    ('"A-Z.az_09:x"', true),
    (to_jsonb(repeat('x', 128)), true),
    (to_jsonb(repeat('x', 129)), false),
    ('""', false),
    ('"a b"', false),
    ('"a/b"', false),
    ('"a\"b"', false),
    ('"a\\b"', false),
    ('"a\nb"', false),
    ('"\u00e9t\u00e9"', false),
    ('"a\u0041"', true),            -- an escape the request used for an allowed letter
    ('5', false),
    ('true', false),
    ('null', false),
    ('{"a": "b"}', false),
    ('["a"]', false),
    (NULL, false)) AS x(v, want);

-- lease._int -------------------------------------------------------------------
SELECT is(lease._int(v), want, '_int(' || coalesce(v::text, 'SQL NULL') || ') is '
                                || coalesce(want::text, 'NULL'))
  FROM (VALUES
    ('30000'::jsonb, 30000::bigint),
    ('-7', -7),
    ('9223372036854775807', 9223372036854775807),
    ('5e1', 50),                      -- jsonb keeps the number, and prints it 50
    ('30000.5', NULL),
    ('"30000"', NULL),
    ('true', NULL),
    ('null', NULL),
    (NULL, NULL)) AS x(v, want);

-- lease._identity (the live identity check): forms the vector file (pgtap/24) lacks
SELECT ok((lease._identity('{"tenant_id": "T", "program_id": "p", "target_namespace": "n",
                               "target_id": "t", "actor_name": "a", "workflow_name": "w",
                               "operation_class": "COLLECT"}'::jsonb)).bad_field IS NULL,
          '_identity: operation_class in upper case is the enum member');
SELECT ok((lease._identity('{"tenant_id": "t", "program_id": "p", "target_namespace": "n",
                                   "target_id": "t", "actor_name": "a", "workflow_name": "w",
                                   "operation_class": "null"}'::jsonb)).bad_field IS NOT NULL,
          '_identity: operation_class "null" (a string) is not JSON null');
SELECT ok((lease._identity('{"tenant_id": "t", "program_id": "p", "target_namespace": "n",
                                   "target_id": "t", "actor_name": "a", "workflow_name": 5}'::jsonb)).bad_field IS NOT NULL,
          '_identity: a number where a string belongs, though its text would match');
SELECT ok((lease._identity('{"tenant_id": "t\u0041", "program_id": "p", "target_namespace": "n",
                               "target_id": "t", "actor_name": "a", "workflow_name": "w"}'::jsonb)).bad_field IS NULL,
          '_identity: an escape the request used for an allowed letter');

-- the requested TTL the evidence records: NULL when the request named none
-- (absent or JSON null; the lease then has the policy's default), else the
-- request's -----------------------------------------------------------------------
SELECT t.acq('target_32a') AS qa \gset
SELECT lease.acquire(:'qa'::jsonb) AS ra \gset
SELECT t.acq('target_32b', '{"ttl_ms": null}') AS qb \gset
SELECT lease.acquire(:'qb'::jsonb) AS rb \gset
SELECT t.acq('target_32c', '{"ttl_ms": 45000}') AS qc \gset
SELECT lease.acquire(:'qc'::jsonb) AS rc \gset
SELECT is((SELECT ARRAY[a.requested_ttl_ms, a.effective_ttl_ms] FROM t.audit_of(:'qa'::jsonb ->> 'request_id') a),
          ARRAY[NULL, (SELECT default_ttl_ms FROM lease.policy)],
          'acquire without ttl_ms: no requested TTL, the default in effect');
SELECT is((SELECT ARRAY[a.requested_ttl_ms, a.effective_ttl_ms] FROM t.audit_of(:'qb'::jsonb ->> 'request_id') a),
          ARRAY[NULL, (SELECT default_ttl_ms FROM lease.policy)],
          'acquire with ttl_ms null: no requested TTL, the default in effect');
SELECT is((SELECT ARRAY[a.requested_ttl_ms, a.effective_ttl_ms] FROM t.audit_of(:'qc'::jsonb ->> 'request_id') a),
          ARRAY[45000, 45000]::bigint[], 'acquire with ttl_ms: requested and in effect');
SELECT t.ref(:'rc'::jsonb) AS qd \gset
SELECT lease.renew(:'qd'::jsonb) ->> 'code' AS d_code \gset
SELECT t.ref(:'ra'::jsonb, '{"ttl_ms": null}') AS qe \gset
SELECT lease.renew(:'qe'::jsonb) ->> 'code' AS e_code \gset
SELECT t.ref(:'rb'::jsonb, '{"ttl_ms": 20000}') AS qf \gset
SELECT lease.renew(:'qf'::jsonb) ->> 'code' AS f_code \gset
SELECT is(ARRAY[:'d_code', :'e_code', :'f_code'], ARRAY['lease_renewed', 'lease_renewed', 'lease_renewed'],
          'the three renewals renew');
SELECT is((SELECT ARRAY[a.requested_ttl_ms, a.effective_ttl_ms] FROM t.audit_of(:'qd'::jsonb ->> 'request_id') a),
          ARRAY[NULL, 45000]::bigint[], 'renew without ttl_ms: no requested TTL, the lease''s TTL kept');
SELECT is((SELECT ARRAY[a.requested_ttl_ms, a.effective_ttl_ms] FROM t.audit_of(:'qe'::jsonb ->> 'request_id') a),
          ARRAY[NULL, (SELECT default_ttl_ms FROM lease.policy)],
          'renew with ttl_ms null: no requested TTL, the lease''s TTL kept');
SELECT is((SELECT ARRAY[a.requested_ttl_ms, a.effective_ttl_ms] FROM t.audit_of(:'qf'::jsonb ->> 'request_id') a),
          ARRAY[20000, 20000]::bigint[], 'renew with ttl_ms: requested and in effect');

SELECT * FROM finish();
ROLLBACK;
