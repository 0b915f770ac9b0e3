-- The sweeper's share of sessions (issue 37), lease._expire_sessions: a
-- lease it moves to history leaves its session (the freed lock row's
-- session_id is cleared), so the next bounded batch finds only the leases
-- still active in the session and no batch re-reads the ones moved before
-- it (a row kept pointing at the session made each batch cost as much as
-- everything swept so far). History keeps which session the lease was in.
BEGIN ISOLATION LEVEL READ COMMITTED;
\ir helpers/fixtures.psql
SELECT plan(6);

INSERT INTO lease.sessions (session_id, tenant_id, principal_id, credential_id,
                            service_instance_id, ttl_ms, expires_at, state, created_at,
                            renewed_at, closed_at, open_request_id, open_request_digest)
VALUES ('s_ended', 'tenant-main', 'p1', 'cred-p1', 'inst-1', 30000, now() - interval '1 hour',
        'closed', now() - interval '2 hours', now() - interval '1 hour', now() - interval '1 hour',
        'req-s_ended', '\x00');
-- three leases still active in the ended session (not yet swept)
INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id,
                         actor_name, workflow_name, operation_class, fencing_counter,
                         created_at, state, lease_id, fencing_token, owner_principal_id,
                         owner_client_id, owner_credential_id, service_instance_id,
                         acquired_at, renewed_at, expires_at, ttl_ms, maximum_lifetime_ms,
                         execution_id, job_id, request_id, metadata, session_id)
SELECT t.key(t.ident('held-' || g)), 'tenant-main', 'program-a', 'starintel-target', 'held-' || g,
       'usernamegen', 'default', 'default', 1, now() - interval '2 hours', 'active',
       'lease_held_' || g, 1, 'p1', 'c1', 'cred-p1', 'inst-1', now() - interval '2 hours',
       now() - interval '2 hours', now() + interval '1 hour', 30000, 3600000, 'exec', 'job',
       'req-held-' || g, '{}', 's_ended'
  FROM generate_series(1, 3) g;

SELECT is((SELECT expired FROM lease._expire_sessions(2, 0)), 2, 'a batch of 2 moves 2 leases');
SELECT is((SELECT count(*)::int FROM lease.locks WHERE state = 'free' AND session_id IS NULL
            AND target_id LIKE 'held-%'), 2,
          'the rows it freed no longer point at the session');
SELECT is((SELECT count(*)::int FROM lease.locks WHERE session_id = 's_ended'), 1,
          'only the lease still active points at the session');
SELECT is((SELECT expired FROM lease._expire_sessions(2, 0)), 1, 'the next batch moves the last one');
SELECT is((SELECT count(*)::int FROM lease.locks WHERE session_id = 's_ended'), 0,
          'no lock row points at the swept session');
SELECT is((SELECT count(*)::int FROM lease.history WHERE session_id = 's_ended' AND lease_id LIKE 'lease_held_%'),
          3, 'history keeps the session of each lease moved');

SELECT * FROM finish();
ROLLBACK;
