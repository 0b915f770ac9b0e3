-- Sessions (issue 37) leave lease.sessions with the service's retention
-- step, lease.purge_due (READ COMMITTED: pgtap/50_sessions.sql runs
-- SERIALIZABLE, which purge_due refuses): an ended session (closed, or
-- recorded expired) once it ended longer ago than the idempotency
-- retention, oldest first within the batch, never one still open (however
-- long past its expiry) and never one with a lease still active in it.
BEGIN ISOLATION LEVEL READ COMMITTED;
\ir helpers/fixtures.psql
SELECT plan(7);

-- a session row as session_open and session_close / the sweeper write it,
-- ended (closed_at) `ago` ago, or open and expired `ago` ago
CREATE FUNCTION t.sess(sid text, st text, ago interval) RETURNS void LANGUAGE sql AS $$
    INSERT INTO lease.sessions (session_id, tenant_id, principal_id, credential_id,
                                service_instance_id, ttl_ms, expires_at, state, created_at,
                                renewed_at, closed_at, open_request_id, open_request_digest)
    VALUES (sid, 'tenant-main', 'p1', 'cred-p1', 'inst-1', 30000, now() - ago, st,
            now() - ago - interval '1 minute', now() - ago,
            CASE WHEN st = 'open' THEN NULL ELSE now() - ago END, 'req-' || sid, '\x00') $$;

-- retention of idempotency records: the policy's (one day by default)
SELECT t.sess('s_closed_old', 'closed', interval '3 days'),
       t.sess('s_closed_older', 'closed', interval '4 days'),
       t.sess('s_expired_old', 'expired', interval '2 days'),
       t.sess('s_closed_recent', 'closed', interval '1 hour'),
       t.sess('s_open_stale', 'open', interval '5 days'),
       t.sess('s_closed_held', 'closed', interval '5 days');
-- a lease still active in s_closed_held (not yet ended by the sweeper)
INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id,
                         actor_name, workflow_name, operation_class, fencing_counter,
                         created_at, state, lease_id, fencing_token, owner_principal_id,
                         owner_client_id, owner_credential_id, service_instance_id,
                         acquired_at, renewed_at, expires_at, ttl_ms, maximum_lifetime_ms,
                         execution_id, job_id, request_id, metadata, session_id)
VALUES (t.key(t.ident('held')), 'tenant-main', 'program-a', 'starintel-target', 'held',
        'usernamegen', 'default', 'default', 1, now() - interval '6 days', 'active',
        'lease_held', 1, 'p1', 'c1', 'cred-p1', 'inst-1', now() - interval '6 days',
        now() - interval '6 days', now() + interval '1 hour', 30000, 3600000, 'exec', 'job',
        'req-held', '{}', 's_closed_held');

SET LOCAL ROLE lease_service;
-- a batch of 2: the two oldest purgeable, more due
SELECT lease.purge_due(2) AS p1 \gset
SELECT is((:'p1'::jsonb)->>'sessions_purged', '2', 'a batch purges at most batch sessions');
SELECT ok(((:'p1'::jsonb)->>'more')::boolean, 'a full batch says more is due');
RESET ROLE;
SELECT is((SELECT string_agg(session_id, ',' ORDER BY session_id) FROM lease.sessions
            WHERE session_id IN ('s_closed_old', 's_closed_older', 's_expired_old')),
          's_expired_old', 'oldest first: the 4- and 3-day-old went, the 2-day-old waits');
SET LOCAL ROLE lease_service;
SELECT lease.purge_due(100) AS p2 \gset
SELECT is((:'p2'::jsonb)->>'sessions_purged', '1',
          'the rest past retention: the one recorded expired');
RESET ROLE;
SELECT is((SELECT string_agg(session_id, ',' ORDER BY session_id) FROM lease.sessions),
          's_closed_held,s_closed_recent,s_open_stale',
          'kept: inside retention, still open, or with an active lease in it');
SET LOCAL ROLE lease_service;
SELECT lease.purge_due(100) AS p3 \gset
SELECT is((:'p3'::jsonb)->>'sessions_purged', '0', 'nothing more is due');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM lease.sessions), 3, 'a repeat purges nothing');

SELECT * FROM finish();
ROLLBACK;
