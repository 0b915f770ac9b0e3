-- 0023: lease.idempotency and lease.audit_events at a statistics target of
-- 10 on every column (was the server's default_statistics_target, 100), so
-- that ANALYZE samples 3,000 of their rows instead of 30,000.
--
-- ANALYZE holds a snapshot while it samples, and while any snapshot in the
-- database is held no old row version can be pruned: renewals stop being
-- HOT, write index entries, and renew-batches of disjoint leases fail each
-- other with serialization failures (retried, never lost; docs/operators.md,
-- "Long transactions and batch renewals"). These two tables take a row per
-- state-changing call, so autovacuum analyzes them often and they are the
-- largest it samples. On the test machine (cached): 2,000,000 idempotency
-- rows (1 GB) took 0.38-0.46 s at 100 and 0.027-0.031 s at 10; 1,000,000
-- audit rows (217 MB) 0.28-0.38 s and 0.023-0.027 s. With autovacuum
-- visiting every second, race_renew_batches' sittings went from 10-28 and
-- 53-56 retries to 0 and 0-5.
--
-- What plans with these statistics: equality on idempotency's primary key,
-- the retention purges' ranges on expires_at and occurred_at, and operators'
-- audit queries (equality on lease_id, tenant_id, request_id; time ranges),
-- which ten histogram buckets and ten common values estimate well enough.
-- A column added by a later migration gets the default unless it says
-- otherwise; the sample is 300 x the largest target among the columns.
--
-- SET STATISTICS takes a SHARE UPDATE EXCLUSIVE lock (no lease traffic
-- waits) and rewrites nothing; the next ANALYZE uses it.

DO $$
DECLARE
    t regclass;
    c name;
BEGIN
    FOREACH t IN ARRAY ARRAY['lease.idempotency', 'lease.audit_events']::regclass[] LOOP
        FOR c IN SELECT attname FROM pg_attribute
                  WHERE attrelid = t AND attnum > 0 AND NOT attisdropped ORDER BY attnum LOOP
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET STATISTICS 10', t, c);
        END LOOP;
    END LOOP;
END
$$;
