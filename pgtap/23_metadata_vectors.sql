-- Metadata rules: every shared vector of tests/vectors/metadata.json (the
-- same file tests/unit/test_metadata_vectors.c runs through the C codec)
-- through lease._bad_metadata and through lease.acquire. Each input is the
-- metadata's JSON text, so numbers arrive exactly as written. The plan is
-- computed from the file, so a new vector is a new test.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
\set vectors `cat tests/vectors/metadata.json`

CREATE TABLE t.vec (kind text, n bigint, v jsonb);
INSERT INTO t.vec
SELECT 'accepted', n, v FROM jsonb_array_elements(:'vectors'::jsonb -> 'accepted') WITH ORDINALITY x(v, n)
UNION ALL
SELECT 'rejected', n, v FROM jsonb_array_elements(:'vectors'::jsonb -> 'rejected') WITH ORDINALITY x(v, n);
GRANT SELECT ON t.vec TO PUBLIC;

SELECT plan(3 + 2 * (SELECT count(*)::int FROM t.vec));

SELECT cmp_ok((SELECT count(*)::int FROM t.vec WHERE kind = 'accepted'), '>=', 20,
              'the vector file has accepted vectors');
SELECT cmp_ok((SELECT count(*)::int FROM t.vec WHERE kind = 'rejected'), '>=', 30,
              'the vector file has rejected vectors');

-- the rule itself: NULL when accepted, else the field it names
SELECT is(lease._bad_metadata((v ->> 'input')::jsonb), NULL,
          '_bad_metadata accepts #' || n || ' (' || (v ->> 'why') || ')')
  FROM t.vec WHERE kind = 'accepted' ORDER BY n;
SELECT is(lease._bad_metadata((v ->> 'input')::jsonb), v ->> 'field',
          '_bad_metadata rejects #' || n || ' (' || (v ->> 'why') || ') naming ' || (v ->> 'field'))
  FROM t.vec WHERE kind = 'rejected' ORDER BY n;

-- lease.acquire as a caller sends it: each vector on a target of its own
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE acq ON COMMIT DROP AS
SELECT kind, n, v,
       lease.acquire(t.acq('meta-' || kind || '-' || n,
                           jsonb_build_object('metadata', (v ->> 'input')::jsonb))) AS r
  FROM t.vec ORDER BY kind, n;

SELECT is(jsonb_build_object('code', r ->> 'code', 'metadata', r #> '{lease,metadata}'),
          jsonb_build_object('code', 'lease_acquired', 'metadata', (v ->> 'input')::jsonb),
          'acquire accepts #' || n || ' and stores the metadata sent')
  FROM acq WHERE kind = 'accepted' ORDER BY n;
SELECT is(jsonb_build_object('code', r ->> 'code', 'field', r ->> 'field'),
          jsonb_build_object('code', 'invalid_lease_request', 'field', v ->> 'field'),
          'acquire rejects #' || n || ' naming ' || (v ->> 'field'))
  FROM acq WHERE kind = 'rejected' ORDER BY n;
RESET ROLE;

SELECT is((SELECT count(*)::int FROM lease.locks WHERE target_id LIKE 'meta-rejected-%'), 0,
          'rejected vectors created nothing');

SELECT * FROM finish();
ROLLBACK;
