CREATE OR REPLACE FUNCTION lease.health() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT jsonb_build_object(
            'schema_version', (SELECT max(version) FROM lease.schema_migrations),
            'sealed', ns.sealed OR m.why IS NOT NULL,
            'sealed_reason', coalesce(ns.sealed_reason, m.why),
            'epoch', ns.epoch,
            'active_leases', (SELECT count(*) FROM lease.locks l
                               WHERE l.state = 'active'
                                 AND lease._effective_expiry(l.session_id, l.expires_at) > now()))
          FROM lease.namespace_state ns, lease.policy pol,
               LATERAL (SELECT CASE WHEN pg_is_in_recovery() THEN 'the database is a standby'
                                    ELSE lease._namespace_mismatch(ns, pol.seal_on_timeline_change)
                               END AS why) m);

COMMENT ON FUNCTION lease.health() IS
    'What readiness checks and operators read in one call: schema version, whether the namespace is sealed and why, the epoch and how many leases are active at backend time.';

REVOKE ALL ON FUNCTION lease.health() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.health() TO lease_service;
GRANT EXECUTE ON FUNCTION lease.health() TO lease_operator;
