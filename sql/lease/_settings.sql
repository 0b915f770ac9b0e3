CREATE OR REPLACE VIEW lease._settings AS
SELECT pol.minimum_ttl_ms, pol.default_ttl_ms, pol.maximum_ttl_ms, pol.maximum_lifetime_ms,
       pol.idempotency_retention_ms, pol.token_limit,
       ns.sealed OR ns.timeline_id IS NULL
       OR lease._namespace_mismatch(ns, pol.seal_on_timeline_change) IS NOT NULL AS guard_needed
  FROM lease.policy pol, lease.namespace_state ns;

COMMENT ON VIEW lease._settings IS
    'Everything a deciding operation reads before it decides, in one row: the policy, and whether the namespace guard must look closer (sealed, not recorded yet, or this database is not the recorded one). Internal: no role may read it.';
REVOKE ALL ON TABLE lease._settings FROM PUBLIC;
