-- One acquire -> renew -> release cycle on a random identity out of
-- :identities, each step one call in its own SERIALIZABLE transaction, the
-- way leased makes them. bench_req (created by ./run in the throwaway
-- database) builds the common request: deadline, a random request id per
-- step, any 64-hex digest (the service computes a real one), principal and
-- identity.
\set target random(1, :identities)
\set rid random(1, 9000000000000000000)
SELECT coalesce(r #>> '{lease,lease_id}', 'none') AS lease_id,
       coalesce(r #>> '{lease,fencing_token}', '1') AS token
  FROM lease.acquire(bench_req('a', :rid, :target, :client_id,
       jsonb_build_object('execution_id', 'e' || :rid, 'job_id', 'j', 'ttl_ms', 30000))) r \gset
SELECT lease.renew(bench_req('r', :rid, :target, :client_id,
       jsonb_build_object('lease_id', ':lease_id', 'fencing_token', (:token))));
SELECT lease.release(bench_req('l', :rid, :target, :client_id,
       jsonb_build_object('lease_id', ':lease_id', 'fencing_token', (:token))));
