-- Sessions (issue 37): lease.session_open, lease.session_keepalive and
-- lease.session_close decide with now(), only for the principal and
-- credential that opened the session within its tenant; open and close are
-- idempotent by request id and audited; a keep-alive writes only the
-- session's row (no idempotency record, no audit event, no lease row).
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(81);

-- typed calls as the service makes them, principal p1 unless told
CREATE FUNCTION t.sopen(rid text, ttl bigint DEFAULT 30000, p text DEFAULT 'p1',
                        tenant text DEFAULT 'tenant-main', digest text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql VOLATILE
RETURN lease.session_open(tenant, 'inst-1', ttl, p, 'cred-' || p, 'worker', rid,
                          coalesce(digest, encode(sha256(convert_to(rid, 'UTF8')), 'hex')),
                          now() + interval '1 hour', 'corr-1', 'default', 2);
CREATE FUNCTION t.skeep(sid text, p text DEFAULT 'p1', cred text DEFAULT NULL,
                        tenant text DEFAULT 'tenant-main')
RETURNS jsonb LANGUAGE sql VOLATILE
RETURN lease.session_keepalive(sid, tenant, p, coalesce(cred, 'cred-' || p),
                               now() + interval '1 hour');
CREATE FUNCTION t.sclose(sid text, rid text, p text DEFAULT 'p1', cred text DEFAULT NULL,
                         tenant text DEFAULT 'tenant-main', digest text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql VOLATILE
RETURN lease.session_close(sid, tenant, p, coalesce(cred, 'cred-' || p), 'worker', rid,
                           coalesce(digest, encode(sha256(convert_to(rid, 'UTF8')), 'hex')),
                           now() + interval '1 hour', 'corr-2', 'default', 2);
CREATE FUNCTION t.session(sid text) RETURNS lease.sessions LANGUAGE sql STABLE
RETURN (SELECT s FROM lease.sessions s WHERE s.session_id = sid);
CREATE FUNCTION t.writes() RETURNS text LANGUAGE sql STABLE
RETURN concat_ws('|', (SELECT count(*) FROM lease.audit_events),
                 (SELECT count(*) FROM lease.idempotency_keys),
                 (SELECT string_agg(l::text, ',' ORDER BY l.lock_key) FROM lease.locks l));
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA t TO PUBLIC;

SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          'the service may call ' || f || ', PUBLIC may not')
  FROM (VALUES ('lease.session_open(text,text,bigint,text,text,text,text,text,timestamp with time zone,text,text,integer)'),
               ('lease.session_keepalive(text,text,text,text,timestamp with time zone)'),
               ('lease.session_close(text,text,text,text,text,text,text,timestamp with time zone,text,text,integer)')) v(f)
 ORDER BY f;

-- open --------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.sopen('open-1') AS o1 \gset
RESET ROLE;
SELECT is(:'o1'::jsonb ->> 'code', 'lease_acquired', 'open answers lease_acquired');
SELECT is(:'o1'::jsonb #>> '{session,state}', 'open', 'the session is open');
SELECT ok(:'o1'::jsonb #>> '{session,session_id}' ~ '^session_[0-9a-f]{32}$', 'a session id');
SELECT :'o1'::jsonb #>> '{session,session_id}' AS sid \gset
SELECT is((t.session(:'sid')).expires_at, date_trunc('milliseconds', now()) + interval '30 seconds', 'expires_at = now() + ttl');
SELECT is(((t.session(:'sid')).tenant_id, (t.session(:'sid')).principal_id,
           (t.session(:'sid')).credential_id), ('tenant-main'::text, 'p1'::text, 'cred-p1'::text),
          'the session is the opener''s');
SELECT is((SELECT count(*) FROM lease.audit_events WHERE event_type = 'session_open'
             AND session_id = :'sid' AND request_id = 'open-1'), 1::bigint,
          'open writes one session_open audit event naming the session');
SELECT t.writes() AS before \gset
SET LOCAL ROLE lease_service;
SELECT t.sopen('open-1') AS o1r \gset
SELECT t.sopen('open-1', digest => repeat('0', 64)) AS o1c \gset
RESET ROLE;
SELECT is(:'o1r'::jsonb #>> '{session,session_id}', :'sid', 'a repeated open answers the same session');
SELECT is(:'o1r'::jsonb ->> 'replayed', 'true', '... replayed');
SELECT is(:'o1c'::jsonb, '{"code":"idempotency_conflict"}'::jsonb,
          'a repeated request id with another digest: idempotency_conflict');
SELECT is((SELECT count(*) FROM lease.sessions), 1::bigint, 'one session row');
SELECT is(t.writes(), :'before', 'repeats wrote no audit event, no idempotency record');

SET LOCAL ROLE lease_service;
SELECT is(t.sopen('open-2', ttl => 1000) ->> 'field', 'ttl_ms', 'TTL bounds apply to a session');
SELECT is(t.sopen('open-3', tenant => 'Bad Tenant!') ->> 'field', 'tenant_id', 'a bad tenant is refused');
SELECT is(lease.session_open('tenant-main', 'inst 1', 30000, 'p1', 'cred-p1', 'worker', 'open-4',
                             repeat('a', 64), now() + interval '1 hour', NULL, NULL, NULL) ->> 'field',
          'service_instance_id', 'a bad service instance is refused');
SELECT is(lease.session_open('tenant-main', 'inst-1', 30000, 'p1', 'cred-p1', 'worker', 'open-5',
                             repeat('a', 64), now() - interval '1 second', NULL, NULL, NULL),
          '{"code":"deadline_exceeded"}'::jsonb, 'a passed deadline: deadline_exceeded');
RESET ROLE;
SELECT is((SELECT count(*) FROM lease.sessions), 1::bigint, 'refused opens wrote no session');

-- keep-alive ----------------------------------------------------------------------
-- the session was kept alive 20 s ago: 10 s are left
UPDATE lease.sessions SET expires_at = now() + interval '10 seconds',
                          renewed_at = now() - interval '20 seconds' WHERE session_id = :'sid';
SELECT t.writes() AS before \gset
SET LOCAL ROLE lease_service;
SELECT t.skeep(:'sid') AS k1 \gset
RESET ROLE;
SELECT is(:'k1'::jsonb ->> 'code', 'lease_renewed', 'the opener keeps it alive: lease_renewed');
SELECT is((t.session(:'sid')).expires_at, date_trunc('milliseconds', now()) + interval '30 seconds',
          'a keep-alive extends to now() + ttl');
SELECT is((t.session(:'sid')).renewed_at, date_trunc('milliseconds', now()), 'renewed_at is backend time');
SELECT is(t.writes(), :'before',
          'a keep-alive writes no audit event, no idempotency record, no lease row');
SET LOCAL ROLE lease_service;
SELECT is(t.skeep(:'sid') ->> 'code', 'lease_renewed', 'a repeated keep-alive is the same (idempotent by value)');
RESET ROLE;
SELECT is((t.session(:'sid')).expires_at, date_trunc('milliseconds', now()) + interval '30 seconds', '... and extends to the same time');

SELECT t.session(:'sid')::text AS srow \gset
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE wrong (what text, r jsonb) ON COMMIT DROP;
INSERT INTO wrong VALUES
  ('principal', t.skeep(:'sid', p => 'p2', cred => 'cred-p1')),
  ('credential', t.skeep(:'sid', cred => 'cred-other')),
  ('tenant', t.skeep(:'sid', tenant => 'tenant-other')),
  ('session', t.skeep('session_00000000000000000000000000000000'));
SELECT is(r, '{"code":"lease_lost"}'::jsonb, 'keep-alive with another ' || what || ': lease_lost')
  FROM wrong ORDER BY what;
SELECT is(t.skeep('bad id!') ->> 'field', 'session_id', 'a malformed session id is refused');
RESET ROLE;
SELECT is(t.session(:'sid')::text, :'srow', 'refused keep-alives changed nothing');

-- an expired session cannot be kept alive: now() decides
SELECT t.sopen('open-exp') #>> '{session,session_id}' AS sexp \gset
UPDATE lease.sessions SET expires_at = now() - interval '1 millisecond' WHERE session_id = :'sexp';
SET LOCAL ROLE lease_service;
SELECT is(t.skeep(:'sexp'), '{"code":"lease_lost"}'::jsonb, 'an expired session: lease_lost');
SELECT is(t.sclose(:'sexp', 'close-exp'), '{"code":"lease_lost"}'::jsonb,
          'an expired session cannot be closed: lease_lost');
RESET ROLE;

-- close -------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(t.sclose(:'sid', 'close-0', p => 'p2', cred => 'cred-p1'), '{"code":"lease_lost"}'::jsonb,
          'another principal cannot close it');
SELECT is(t.sclose(:'sid', 'close-0', cred => 'cred-other'), '{"code":"lease_lost"}'::jsonb,
          'another credential cannot close it');
SELECT t.sclose(:'sid', 'close-1') AS c1 \gset
RESET ROLE;
SELECT is(:'c1'::jsonb ->> 'code', 'lease_released', 'the opener closes it: lease_released');
SELECT is(:'c1'::jsonb #>> '{session,state}', 'closed', 'the session is closed');
SELECT is(((t.session(:'sid')).state, (t.session(:'sid')).closed_at), ('closed'::text, date_trunc('milliseconds', now())),
          'closed at backend time');
SELECT is((SELECT count(*) FROM lease.audit_events WHERE event_type = 'session_close'
             AND session_id = :'sid' AND request_id = 'close-1'), 1::bigint,
          'close writes one session_close audit event');
SELECT t.writes() AS before \gset
SET LOCAL ROLE lease_service;
SELECT t.sclose(:'sid', 'close-1') AS c1r \gset
SELECT is(t.sclose(:'sid', 'close-1', digest => repeat('0', 64)),
          '{"code":"idempotency_conflict"}'::jsonb, 'a repeated close with another digest: idempotency_conflict');
SELECT is(t.sclose(:'sid', 'close-2'), '{"code":"lease_lost"}'::jsonb,
          'another close of a closed session: lease_lost');
SELECT is(t.skeep(:'sid'), '{"code":"lease_lost"}'::jsonb, 'a closed session cannot be kept alive');
RESET ROLE;
SELECT is((:'c1r'::jsonb ->> 'code', :'c1r'::jsonb ->> 'replayed'), ('lease_released'::text, 'true'::text),
          'a repeated close answers the same, replayed');
SELECT is(t.writes(), :'before', 'repeated and refused closes wrote nothing');

-- a lease in a session ------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.sopen('open-L') #>> '{session,session_id}' AS sl \gset
SELECT t.acquire('ses_1', jsonb_build_object('session_id', :'sl')) AS l1 \gset
SELECT t.acquire_typed(t.acq('ses_2')) AS nosession \gset
SELECT lease.acquire_brief_typed(
           ROW('tenant-main', 'program-a', 'starintel-target', 'ses_3', 'usernamegen', 'default',
               'default', NULL)::lease.identity,
           ROW('inst-1', 'exec-1', 'job-1', NULL, NULL, NULL, NULL, 'p1', 'client-p1', 'cred-p1',
               'worker', 'acq-typed-ses', t.digest(), now() + interval '1 hour', NULL, NULL, NULL,
               :'sl')::lease.acquire_request, true) AS l3 \gset
RESET ROLE;
SELECT is((:'l1'::jsonb ->> 'code', (t.lock_of(:'l1'::jsonb #>> '{lease,lease_id}')).session_id),
          ('lease_acquired'::text, :'sl'::text), 'acquire with session_id: the lease is in the session');
SELECT is((:'l3'::jsonb ->> 'code', (t.lock_of(:'l3'::jsonb #>> '{lease,lease_id}')).session_id),
          ('lease_acquired'::text, :'sl'::text), 'the typed acquisition takes session_id too');
SELECT is((t.lock_of(:'l1'::jsonb #>> '{lease,lease_id}')).expires_at, date_trunc('milliseconds', now()) + interval '1 hour',
          'its own expiry is its lifetime bound: the session keeps it alive');
SELECT is(:'l1'::jsonb #>> '{lease,expires_at}', t.rfc3339(now() + interval '30 seconds'),
          'it is answered with the session''s expiry');
SELECT is((t.lock_of(:'nosession'::jsonb #>> '{lease,lease_id}')).session_id, NULL,
          'a lease without session_id has none');
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE wrongs (what text, r jsonb) ON COMMIT DROP;
INSERT INTO wrongs VALUES
  ('another principal''s session', t.acquire('ses_4', jsonb_build_object('session_id', :'sl', 'principal', t.principal('p2')))),
  ('a closed session', t.acquire('ses_4', jsonb_build_object('session_id', :'sid'))),
  ('an expired session', t.acquire('ses_4', jsonb_build_object('session_id', :'sexp'))),
  ('an unknown session', t.acquire('ses_4', '{"session_id": "session_00000000000000000000000000000000"}')),
  ('a session of another tenant', t.acquire('ses_4', jsonb_build_object('session_id', :'sl',
      'lock_identity', t.ident('ses_4', tenant => 'tenant-other'))));
SELECT is(r, '{"code":"lease_lost"}'::jsonb, 'acquire in ' || what || ': lease_lost')
  FROM wrongs ORDER BY what;
RESET ROLE;
SELECT is((SELECT count(*) FROM lease.locks WHERE target_id = 'ses_4'), 0::bigint,
          'no lease was acquired in a session not the caller''s');

-- a keep-alive moves the session, not the leases
SELECT t.writes() AS before \gset
SET LOCAL ROLE lease_service;
SELECT t.skeep(:'sl') AS ignored \gset
RESET ROLE;
SELECT is(t.writes(), :'before', 'a keep-alive of a session holding leases writes no lease row');
SELECT is((SELECT leases FROM lease.active_sessions WHERE session_id = :'sl'), 2::bigint,
          'active_sessions shows the session and how many leases it holds');
SELECT is((SELECT count(*) FROM lease.active_leases WHERE session_id = :'sl'), 2::bigint,
          'active_leases names the session of each');

-- the session expires: every path sees its leases expired ---------------------------
UPDATE lease.sessions SET expires_at = now() - interval '1 millisecond' WHERE session_id = :'sl';
SELECT :'l1'::jsonb #>> '{lease,lease_id}' AS l1id \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.renew(t.ref(:'l1'::jsonb)), '{"code":"lease_lost"}'::jsonb, 'renew: lease_lost');
SELECT is(t.renew_typed(t.ref(:'l1'::jsonb)), '{"code":"lease_lost"}'::jsonb, 'typed renew: lease_lost');
SELECT is(lease.release(t.ref(:'l1'::jsonb)), '{"code":"lease_lost"}'::jsonb, 'release: lease_lost');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, %s)', t.ident('ses_1'), :'l1id',
                        :'l1'::jsonb #>> '{lease,fencing_token}'),
                 'LS010', NULL, 'the fence refuses it');
SELECT is(lease.inspect(t.req(jsonb_build_object('lock_identity', t.ident('ses_1'), 'scope', t.scope())))
            #>> '{lease,state}', 'expired', 'inspect: expired');
SELECT is(lease.inspect(t.req(jsonb_build_object('lock_identity', t.ident('ses_1'), 'scope', t.scope())))
            #>> '{lease,expires_at}', t.rfc3339(now() - interval '1 millisecond'),
          'inspect: expires_at is the session''s');
SELECT ok(lease.watch_ended(ARRAY[:'l1id']) = jsonb_build_array(:'l1id'), 'watch_ended reports it');
SELECT ok(NOT (lease.list_by_program(t.req(jsonb_build_object('scope', t.scope(), 'tenant_id', 'tenant-main',
              'program_id', 'program-a', 'page_size', 500))) -> 'leases') @> jsonb_build_array(jsonb_build_object('lease_id', :'l1id')),
          'list leaves it out');
RESET ROLE;
SELECT is((SELECT count(*) FROM lease.active_leases WHERE lease_id = :'l1id'), 0::bigint,
          'active_leases leaves it out');
SELECT is((SELECT expires_at FROM lease.lease_history WHERE lease_id = :'l1id'),
          now() - interval '1 millisecond', 'lease_history shows it expired at the session''s end');
-- another holder takes the identity over, with a greater token and the history written
SET LOCAL ROLE lease_service;
SELECT t.acquire('ses_1', jsonb_build_object('principal', t.principal('p2'))) AS over \gset
RESET ROLE;
SELECT is(:'over'::jsonb ->> 'code', 'lease_acquired', 'acquire of its identity takes it over');
SELECT cmp_ok((:'over'::jsonb #>> '{lease,fencing_token}')::bigint, '>',
              (:'l1'::jsonb #>> '{lease,fencing_token}')::bigint, '... with a greater token');
SELECT is((SELECT (state::text, ended_at, session_id) FROM lease.history WHERE lease_id = :'l1id'),
          ('expired'::text, now() - interval '1 millisecond', :'sl'::text),
          'its history: expired at the session''s end, naming the session');
-- the takeover itself records the session's end (it writes the session row, so a
-- keep-alive that began before the expiry cannot also commit: race_session_expiry_instant)
SELECT is(((t.session(:'sl')).state, (t.session(:'sl')).closed_at), ('expired'::text, now() - interval '1 millisecond'),
          'the takeover records the session expired, at its end');
SELECT is((SELECT count(*) FROM lease.audit_events WHERE event_type = 'session_expire'
             AND session_id = :'sl'), 1::bigint, '... with its one session_expire event');
-- the sweeper moves the session's other lease and records the session expired
SET LOCAL ROLE lease_service;
SELECT is(lease.sweep_expired(100) ->> 'expired', '1', 'the sweeper moves the session''s remaining lease');
RESET ROLE;
SELECT is((SELECT state::text FROM lease.history WHERE lease_id = :'l3'::jsonb #>> '{lease,lease_id}'),
          'expired', '... into history');
SELECT is((t.session(:'sl')).state, 'expired', 'the session is still recorded expired');
SELECT is((SELECT count(*) FROM lease.audit_events WHERE event_type = 'session_expire'
             AND session_id = :'sl'), 1::bigint, 'still one session_expire event');

-- close ends the session's leases, each with history and audit -----------------------
SET LOCAL ROLE lease_service;
SELECT t.sopen('open-C') #>> '{session,session_id}' AS sc \gset
SELECT t.acquire('ses_c' || g, jsonb_build_object('session_id', :'sc')) ->> 'code' FROM generate_series(1, 3) g \g /dev/null
SELECT t.sclose(:'sc', 'close-C') AS cc \gset
RESET ROLE;
SELECT is((:'cc'::jsonb ->> 'leases_ended', :'cc'::jsonb ->> 'more'), ('3'::text, 'false'::text),
          'close ended the session''s three leases');
SELECT is((SELECT count(*) FROM lease.history WHERE session_id = :'sc' AND state = 'released'
             AND end_reason = 'session closed' AND ended_by_principal_id = 'p1'), 3::bigint,
          'each has its history row: released by the opener, reason session closed');
SELECT is((SELECT count(*) FROM lease.audit_events WHERE session_id = :'sc'
             AND event_type = 'target_lease_release' AND request_id = 'close-C'), 3::bigint,
          'each has its audit event naming the session');
SELECT is((SELECT count(*) FROM lease.locks WHERE session_id = :'sc' AND state = 'active'), 0::bigint,
          'none is held any more');

SELECT * FROM finish();
ROLLBACK;
