-- The short answer is the service's typed call, not a request member
-- (docs/sql-api.md, "Result shape"; migration 0018): lease.acquire_brief_typed,
-- renew_brief_typed and release_brief_typed decide exactly as lease.acquire,
-- renew and release (one function each decides: acquire_brief_typed, _renew_t,
-- _end_t) and answer without what the request named; a "brief" member no
-- longer changes any answer. The jsonb brief functions are gone.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(34);

-- the functions, who may call them ------------------------------------------------
SELECT hasnt_function('lease', 'acquire_brief', ARRAY['jsonb'], 'lease.acquire_brief is gone');
SELECT hasnt_function('lease', 'renew_brief', ARRAY['jsonb'], 'lease.renew_brief is gone');
SELECT hasnt_function('lease', 'release_brief', ARRAY['jsonb'], 'lease.release_brief is gone');
SELECT hasnt_function('lease', '_brief', ARRAY['jsonb'], 'the helper that read "brief" is dropped');
SELECT hasnt_function('lease', '_end', ARRAY['jsonb', 'text', 'text', 'text'],
                      'lease._end without its answer argument is dropped');
SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          f || ': the service may call it, PUBLIC may not')
  FROM unnest(ARRAY['lease.acquire_brief_typed(lease.identity,lease.acquire_request,boolean)',
                    'lease.renew_brief_typed(lease.identity,lease.renew_request,boolean)',
                    'lease.release_brief_typed(lease.identity,lease.release_request)']) f;
SELECT ok(NOT has_function_privilege('lease_service', f, 'EXECUTE'),
          f || ': internal, the service cannot choose the answer''s shape by argument')
  FROM unnest(ARRAY['lease._end_t(lease.identity,lease.release_request,text,text,text,text,text,boolean,text,boolean)',
                    'lease._end(jsonb,text,text,text,boolean,boolean)']) f;
-- an acquisition has one decider, the service's call; its brief argument
-- (true unless lease.acquire asks for the whole record) is its only mode
SELECT hasnt_function('lease', '_acquire_t', 'lease._acquire_t is gone: lease.acquire_brief_typed decides');

-- acquire: the same decision and evidence, a shorter answer -----------------------
SET LOCAL ROLE lease_service;
SELECT t.acq('answer_01') AS qb \gset
SELECT t.acquire_typed(:'qb'::jsonb) AS ab \gset
SELECT t.acq('answer_02') AS qw \gset
SELECT lease.acquire(:'qw'::jsonb) AS aw \gset
RESET ROLE;
SELECT is(:'ab'::jsonb ->> 'code', 'lease_acquired', 'the typed acquire acquires');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'ab'::jsonb -> 'lease') k),
          ARRAY['acquired_at', 'expires_at', 'fencing_token', 'lease_id', 'maximum_lifetime_ms',
                'owner_client_id', 'owner_credential_id', 'renewed_at', 'state', 'ttl_ms'],
          'its lease: what the database decided, nothing the request named');
SELECT is(:'ab'::jsonb #>> '{lease,lease_id}', (t.row_of(t.ident('answer_01'))).lease_id,
          'the lease id is the stored one');
SELECT ok(:'aw'::jsonb #> '{lease,lock_identity}' IS NOT NULL
          AND :'aw'::jsonb #>> '{lease,execution_id}' = 'exec-1',
          'lease.acquire still answers the whole record');
SELECT is((SELECT result FROM lease.idempotency WHERE request_id = :'qb'::jsonb ->> 'request_id'),
          :'ab'::jsonb - 'replayed' - 'current_state', 'the stored answer is the one given');
-- the audit event of either call: the same columns, only the identity differs
SELECT is((SELECT to_jsonb(a) - '{event_id,occurred_at,recorded_at,request_id,correlation_id,target_id,lease_id}'::text[]
             FROM lease.audit_events a WHERE request_id = :'qb'::jsonb ->> 'request_id'),
          (SELECT to_jsonb(a) - '{event_id,occurred_at,recorded_at,request_id,correlation_id,target_id,lease_id}'::text[]
             FROM lease.audit_events a WHERE request_id = :'qw'::jsonb ->> 'request_id'),
          'the same audit event as lease.acquire''s');
-- a repeat is answered as first given, whichever function repeats it
SET LOCAL ROLE lease_service;
SELECT t.acquire_typed(:'qb'::jsonb) AS ab2 \gset
SELECT lease.acquire(:'qb'::jsonb) AS ab3 \gset
RESET ROLE;
SELECT is(:'ab2'::jsonb - 'replayed' - 'current_state', :'ab'::jsonb - 'replayed' - 'current_state',
          'a repeated typed acquire: the stored answer');
SELECT ok((:'ab2'::jsonb ->> 'replayed')::boolean AND (:'ab3'::jsonb ->> 'replayed')::boolean
          AND :'ab3'::jsonb -> 'lease' = :'ab'::jsonb -> 'lease',
          'through lease.acquire too: replayed, the answer as it was given');

-- renew --------------------------------------------------------------------------
SELECT t.ref(:'aw'::jsonb, '{"ttl_ms": 60000}') AS rq \gset
SET LOCAL ROLE lease_service;
SELECT t.renew_typed(:'rq'::jsonb) AS rb \gset
SELECT t.renew_typed(t.ref(:'aw'::jsonb, '{"fencing_token": 99}')) AS rlost \gset
RESET ROLE;
SELECT is(:'rb'::jsonb ->> 'code', 'lease_renewed', 'the typed renew renews');
SELECT ok(NOT (:'rb'::jsonb -> 'lease') ?| ARRAY['lock_identity', 'lease_id', 'fencing_token'],
          'its lease leaves out the identity, lease id and token the request named');
SELECT is(((:'rb'::jsonb #>> '{lease,expires_at}')::timestamptz),
          date_trunc('milliseconds', now()) + interval '60 s', 'the new expiry, from backend time');
SELECT is((t.row_of(t.ident('answer_02'))).ttl_ms, 60000::bigint, 'the row is renewed');
SELECT is(:'rlost'::jsonb, '{"code":"lease_lost"}'::jsonb, 'the exact ownership check: a wrong token is lost');
SELECT ok(t.idem_count(:'rq'::jsonb ->> 'request_id') = 1 AND t.audit_count(:'rq'::jsonb ->> 'request_id') = 1,
          'one idempotency row and one audit event');

-- release ------------------------------------------------------------------------
SELECT t.ref(:'ab'::jsonb, jsonb_build_object('lock_identity', t.ident('answer_01'),
                                              'service_instance_id', 'inst-1',
                                              'principal', t.principal('p1'))) AS lq \gset
SET LOCAL ROLE lease_service;
SELECT t.release_typed(:'lq'::jsonb) AS lb \gset
RESET ROLE;
SELECT is(:'lb'::jsonb ->> 'code', 'lease_released', 'the typed release releases');
SELECT ok(:'lb'::jsonb #>> '{lease,state}' = 'released'
          AND (:'lb'::jsonb #>> '{lease,ended_at}')::timestamptz = date_trunc('milliseconds', now())
          AND NOT (:'lb'::jsonb -> 'lease') ?| ARRAY['lock_identity', 'lease_id', 'fencing_token'],
          'its lease: the terminal state and when, not what the request named');
SELECT is((SELECT state FROM lease.history WHERE lease_id = :'ab'::jsonb #>> '{lease,lease_id}'),
          'released', 'the history row is written');
SELECT ok(t.idem_count(:'lq'::jsonb ->> 'request_id') = 1 AND t.audit_count(:'lq'::jsonb ->> 'request_id') = 1,
          'one idempotency row and one audit event');

-- a request that still carries "brief": ignored --------------------------------------
SET LOCAL ROLE lease_service;
SELECT lease.acquire(t.acq('answer_03', '{"brief": true}')) AS af \gset
SELECT lease.renew(t.ref(:'af'::jsonb, '{"brief": true}')) AS rf \gset
SELECT lease.renew_many(jsonb_build_object('renewals',
           jsonb_build_array(t.ref(:'af'::jsonb, '{"brief": true}')))) AS mf \gset
SELECT lease.release(t.ref(:'af'::jsonb, '{"brief": true}')) AS lf \gset
SELECT t.acquire_typed(t.acq('answer_04', '{"brief": false}')) AS bf \gset
RESET ROLE;
SELECT is(:'af'::jsonb #> '{lease,lock_identity}', t.ident('answer_03'),
          'lease.acquire with "brief": true answers the whole record');
SELECT is(:'rf'::jsonb #>> '{lease,lease_id}', :'af'::jsonb #>> '{lease,lease_id}',
          'lease.renew with "brief": true answers the whole record');
SELECT is(:'mf'::jsonb #>> '{results,0,lease,lease_id}', :'af'::jsonb #>> '{lease,lease_id}',
          'lease.renew_many: each item answered whole, "brief" ignored');
SELECT ok(:'lf'::jsonb ->> 'code' = 'lease_released'
          AND :'lf'::jsonb #> '{lease,lock_identity}' = t.ident('answer_03'),
          'lease.release with "brief": true answers the whole history record');
SELECT ok(:'bf'::jsonb ->> 'code' = 'lease_acquired'
          AND NOT (:'bf'::jsonb -> 'lease') ? 'lock_identity',
          'the typed acquire of a request with "brief": false still answers briefly');

SELECT * FROM finish();
ROLLBACK;
