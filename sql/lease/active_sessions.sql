CREATE OR REPLACE VIEW lease.active_sessions AS
SELECT s.session_id, s.tenant_id, s.principal_id, s.credential_id, s.service_instance_id,
       s.ttl_ms, s.created_at, s.renewed_at, s.expires_at, s.expires_at - now() AS remaining,
       (SELECT count(*) FROM lease.locks l
         WHERE l.session_id = s.session_id AND l.state = 'active'
           AND l.expires_at > now()) AS leases
  FROM lease.sessions s
 WHERE s.state = 'open' AND s.expires_at > now();

COMMENT ON VIEW lease.active_sessions IS
    'Operators: every session open at backend time (open and not past expires_at), with its owner, TTL, times and how many leases it holds (their own expiry not passed either; lease.active_leases lists them by session_id). Read-only (lease_operator).';
REVOKE ALL ON TABLE lease.active_sessions FROM PUBLIC;
GRANT SELECT ON TABLE lease.active_sessions TO lease_operator;
