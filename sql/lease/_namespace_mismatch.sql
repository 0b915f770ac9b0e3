CREATE OR REPLACE FUNCTION lease._namespace_mismatch(ns lease.namespace_state, seal_on_timeline_change boolean)
RETURNS text
LANGUAGE sql VOLATILE
RETURN CASE
    WHEN ns.relation_oid IS NOT NULL AND ns.relation_oid <> 'lease.namespace_state'::regclass::oid
        THEN 'the lease schema was recreated (restored from a logical dump)'
    WHEN ns.system_identifier IS NOT NULL
         AND ns.system_identifier <> (pg_control_system()).system_identifier
        THEN 'database restored onto another cluster (system identifier changed)'
    WHEN seal_on_timeline_change AND ns.timeline_id IS NOT NULL
         AND ns.timeline_id <> lease._insert_timeline()
        THEN 'timeline changed from ' || ns.timeline_id || ' to ' || lease._insert_timeline()
             || ' (failover or point-in-time restore)'
    END;

COMMENT ON FUNCTION lease._namespace_mismatch(lease.namespace_state,boolean) IS
    'Why this database may not decide for the namespace recorded in ns, or NULL when it may. A component recorded as NULL is not compared (not recorded yet, or not readable when it was recorded). Pure: records and seals nothing.';

REVOKE ALL ON FUNCTION lease._namespace_mismatch(lease.namespace_state,boolean) FROM PUBLIC;
