-- The CHECK constraints of migrations 0002 (before 0009 turned them into domains and one
-- small rule), for tests/bench/callgrind/pair --sql: what they cost per pair.
ALTER TABLE lease.locks ADD CONSTRAINT old_locks_check CHECK (state = 'free' OR lease_id IS NOT NULL AND fencing_token IS NOT NULL
              AND owner_principal_id IS NOT NULL AND owner_client_id IS NOT NULL
              AND owner_credential_id IS NOT NULL AND service_instance_id IS NOT NULL
              AND acquired_at IS NOT NULL AND renewed_at IS NOT NULL AND expires_at IS NOT NULL
              AND ttl_ms IS NOT NULL AND maximum_lifetime_ms IS NOT NULL
              AND execution_id IS NOT NULL AND job_id IS NOT NULL AND request_id IS NOT NULL
              AND metadata IS NOT NULL
              AND fencing_token BETWEEN 1 AND fencing_counter
              AND renewed_at >= acquired_at
              AND expires_at <= acquired_at + maximum_lifetime_ms * interval '1 millisecond'),
  ADD CONSTRAINT old_state CHECK (state IN ('free','active'));
ALTER TABLE lease.history ADD CONSTRAINT old_h1 CHECK (fencing_token > 0), ADD CONSTRAINT old_h2 CHECK (state IN ('expired', 'released', 'revoked')), ADD CONSTRAINT old_h3 CHECK (state = 'expired' OR ended_by_principal_id IS NOT NULL);
ALTER TABLE lease.idempotency ADD CONSTRAINT old_i1 CHECK (operation IN ('acquire', 'renew', 'release','force_release', 'revoke', 'commit')), ADD CONSTRAINT old_i2 CHECK (length(request_digest) = 32);
ALTER TABLE lease.audit_events ADD CONSTRAINT old_a1 CHECK (event_type IN (
        'target_lease_acquire', 'target_lease_renew', 'target_lease_release',
        'target_lease_force_release', 'target_lease_revoke', 'target_lease_inspect',
        'target_lease_list', 'target_lease_commit', 'target_lease_commit_rejected',
        'target_lease_recover', 'target_lease_quarantine', 'target_lease_alert',
        'target_lease_authenticate', 'credential_create', 'credential_revoke')),
  ADD CONSTRAINT old_a2 CHECK (priority IN ('normal', 'high')), ADD CONSTRAINT old_a3 CHECK (decision IN ('allow', 'deny', 'error')),
  ADD CONSTRAINT old_a4 CHECK (backend_health IN ('ok', 'degraded', 'unavailable'));
