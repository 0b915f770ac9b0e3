CREATE OR REPLACE VIEW lease.quarantined_records AS
SELECT q.quarantine_id, q.lock_key, q.operation, q.detail, q.stored_record, q.detected_at
  FROM lease.quarantine q
 WHERE q.resolved_at IS NULL;

COMMENT ON VIEW lease.quarantined_records IS
    'Operators: the open quarantine cases (corrupt records an operation refused with LS001), newest last. Read-only (lease_operator).';
REVOKE ALL ON TABLE lease.quarantined_records FROM PUBLIC;
GRANT SELECT ON TABLE lease.quarantined_records TO lease_operator;
