-- The background sweeper, as leased runs it, for interference measurements.
SELECT lease.sweep_expired(500);
SELECT lease.purge_retention(500);
