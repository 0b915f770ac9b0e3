-- One acquire -> renew -> release cycle on a random identity out of
-- :identities, each step one call in its own SERIALIZABLE transaction, the
-- way leased makes them. Request ids are random per step; the digest is any
-- 64 hex characters (the service computes a real one).
\set target random(1, :identities)
\set rid random(1, 9000000000000000000)
SELECT coalesce(r #>> '{lease,lease_id}', 'none') AS lease_id,
       coalesce(r #>> '{lease,fencing_token}', '1') AS token
  FROM lease.acquire(jsonb_build_object(
       'deadline_at', to_char((now() + interval '10 seconds') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       'request_id', 'a' || :rid, 'request_digest', md5(:rid::text) || md5(:rid::text),
       'principal', jsonb_build_object('principal_id', 'bench', 'client_id', 'pgbench',
                                       'credential_id', 'key_bench', 'principal_class', 'worker'),
       'lock_identity', jsonb_build_object('tenant_id', 'bench', 'program_id', 'bench',
            'target_namespace', 'bench', 'target_id', 't' || :target, 'actor_name', 'bench',
            'workflow_name', 'default'),
       'service_instance_id', 'si' || :client_id, 'execution_id', 'e' || :rid, 'job_id', 'j',
       'ttl_ms', 30000)) r \gset
SELECT lease.renew(jsonb_build_object(
       'deadline_at', to_char((now() + interval '10 seconds') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       'request_id', 'r' || :rid, 'request_digest', md5(:rid::text) || md5(:rid::text),
       'principal', jsonb_build_object('principal_id', 'bench', 'client_id', 'pgbench',
                                       'credential_id', 'key_bench', 'principal_class', 'worker'),
       'lock_identity', jsonb_build_object('tenant_id', 'bench', 'program_id', 'bench',
            'target_namespace', 'bench', 'target_id', 't' || :target, 'actor_name', 'bench',
            'workflow_name', 'default'),
       'lease_id', ':lease_id', 'fencing_token', (:token),
       'service_instance_id', 'si' || :client_id));
SELECT lease.release(jsonb_build_object(
       'deadline_at', to_char((now() + interval '10 seconds') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       'request_id', 'l' || :rid, 'request_digest', md5(:rid::text) || md5(:rid::text),
       'principal', jsonb_build_object('principal_id', 'bench', 'client_id', 'pgbench',
                                       'credential_id', 'key_bench', 'principal_class', 'worker'),
       'lock_identity', jsonb_build_object('tenant_id', 'bench', 'program_id', 'bench',
            'target_namespace', 'bench', 'target_id', 't' || :target, 'actor_name', 'bench',
            'workflow_name', 'default'),
       'lease_id', ':lease_id', 'fencing_token', (:token),
       'service_instance_id', 'si' || :client_id));
