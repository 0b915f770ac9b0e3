-- lease._answer_of, the row the typed calls answer (lease.answer), carries
-- every member of the jsonb answer it is made from, for every kind of
-- answer the lease operations give: each member is its column's value, and
-- no column holds a value the answer does not have (the lease record's
-- lock_identity aside: the caller named it). A member added to an answer
-- without a column fails here, before the service reads it as absent.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(21);

-- The members of a jsonb answer, the lease record's flattened beside the
-- code (its lock_identity left out), as the row's columns would hold them.
CREATE FUNCTION t.members(a jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE
RETURN (a - 'lease') || CASE WHEN jsonb_typeof(a -> 'lease') = 'object'
                             THEN (a -> 'lease') - 'lock_identity' ELSE '{}' END;

-- Whether the row of a is a: every member its column, every filled column
-- a member. NULL members read as absent (a JSON null and no member are both
-- a NULL column).
CREATE FUNCTION t.lossless(a jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE
RETURN jsonb_strip_nulls(t.flat(a)) = jsonb_strip_nulls(t.members(a));

SELECT has_type('lease', 'answer', 'lease.answer exists');
SELECT ok(NOT has_function_privilege('lease_service', 'lease._answer_of(jsonb)', 'EXECUTE'),
          'lease._answer_of is internal');

SET LOCAL ROLE lease_service;
SELECT t.acquire('ans_1') AS whole \gset
SELECT lease.acquire_brief(t.acq('ans_2', '{"metadata": {"n": 1, "s": "x"}}')) AS brief \gset
SELECT lease.acquire_brief(t.acq('ans_1')) AS conflict \gset
SELECT lease.acquire_brief(t.acq('ans_3', '{"ttl_ms": 1}')) AS invalid \gset
SELECT t.ref(:'whole'::jsonb) AS rr \gset
SELECT lease.renew_brief(:'rr'::jsonb) AS renewed \gset
SELECT t.ref(:'brief'::jsonb || jsonb_build_object('lease', (:'brief'::jsonb -> 'lease')
                                                  || jsonb_build_object('lock_identity', t.ident('ans_2'),
                                                                        'service_instance_id', 'inst-1',
                                                                        'owner_principal_id', 'p1'))) AS ref2 \gset
SELECT lease.release_brief(:'ref2'::jsonb) AS released \gset
SELECT lease.release_brief(:'ref2'::jsonb) AS replayed \gset
SELECT lease.renew_brief(t.ref(:'whole'::jsonb, '{"fencing_token": 99}')) AS lost \gset
SELECT lease.renew_brief(:'rr'::jsonb || jsonb_build_object('request_digest', t.digest())) AS other_digest \gset
RESET ROLE;
SELECT lease.force_release(t.admin(:'whole'::jsonb)) AS forced \gset

SELECT is(:'brief'::jsonb ->> 'code', 'lease_acquired', '(acquired, brief)');
SELECT ok(t.lossless(:'whole'::jsonb), 'an acquisition, whole record');
SELECT ok(t.lossless(:'brief'::jsonb), 'an acquisition, brief record');
SELECT is(:'conflict'::jsonb ->> 'code', 'lease_conflict', '(conflict)');
SELECT ok(t.lossless(:'conflict'::jsonb), 'lease_conflict with retry_after_ms');
SELECT is(:'invalid'::jsonb ->> 'code', 'invalid_lease_request', '(invalid)');
SELECT ok(t.lossless(:'invalid'::jsonb), 'invalid_lease_request with field and detail');
SELECT ok(t.lossless(:'renewed'::jsonb), 'a renewal (metadata, trace, owner)');
SELECT is(:'released'::jsonb ->> 'code', 'lease_released', '(released)');
SELECT ok(t.lossless(:'released'::jsonb), 'a release (ended_at, terminal state)');
SELECT is(:'replayed'::jsonb ->> 'replayed', 'true', '(replayed)');
SELECT ok(t.lossless(:'replayed'::jsonb), 'a replay with current_state');
SELECT is(:'lost'::jsonb ->> 'code', 'lease_lost', '(lost)');
SELECT ok(t.lossless(:'lost'::jsonb), 'lease_lost');
SELECT is(:'other_digest'::jsonb ->> 'code', 'idempotency_conflict', '(idempotency_conflict)');
SELECT ok(t.lossless(:'other_digest'::jsonb), 'idempotency_conflict');
SELECT ok(t.lossless(:'forced'::jsonb), 'a force-release, whole record with reason and incident');

-- what the types are: no member read as text where the service reads a number
SELECT is(t.flat(:'conflict'::jsonb) -> 'retry_after_ms', :'conflict'::jsonb -> 'retry_after_ms',
          'retry_after_ms is a number');
SELECT is((lease._answer_of(:'renewed'::jsonb)).metadata, :'renewed'::jsonb #> '{lease,metadata}',
          'metadata is the stored jsonb');

SELECT * FROM finish();
ROLLBACK;
