-- Seeds a benchmark database as the schema owner, straight into the tables
-- (generate_series, no function calls per row: seconds, not minutes).
--   psql -v n=IDENTITIES -v idem=PER_IDENTITY -v hist=PER_IDENTITY -v audit=ROWS -f seed.sql
-- n      identities t1..tn whose lease.locks row exists (free, counter = hist)
-- idem   idempotency rows per identity (a service that has run a while;
--        retention keeps a day of them)
-- hist   lease.history rows per identity (released leases, tokens 1..hist)
-- audit  lease.audit_events rows in all (acquire/release events spread over
--        the last 30 days)
-- Identities are those the pgbench scripts and http_load use: tenant,
-- program, namespace and actor "bench", workflow "default", target t<k>.
-- If the lead's schema changes lease.locks, lease.history or
-- lease.audit_events, this file follows it.
\set ON_ERROR_STOP on
INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id,
                         actor_name, workflow_name, operation_class, fencing_counter,
                         created_at, state)
SELECT lease.lock_key('bench', 'bench', 'bench', 't' || g, 'bench', 'default'),
       'bench', 'bench', 'bench', 't' || g, 'bench', 'default', 'default', :hist,
       now() - interval '30 days', 'free'
  FROM generate_series(1, :n) g;

-- (schema 27: narrow records; a seeded one keeps its answer, having no audit event)
INSERT INTO lease.idempotency_keys (request_key, expires_at, brief, request_digest, answer)
SELECT lease._request_key(l.lock_key, 'acquire', 'bench', 'seed' || g || '-' || l.target_id),
       now() + interval '1 day', true, sha256(convert_to(g || l.target_id, 'UTF8')),
       '{"code":"lease_acquired"}'
  FROM lease.locks l, generate_series(1, :idem) g;

INSERT INTO lease.history (lease_id, lock_key, tenant_id, program_id, target_namespace,
                           target_id, actor_name, workflow_name, operation_class,
                           fencing_token, owner_principal_id, owner_client_id,
                           owner_credential_id, service_instance_id, acquired_at, renewed_at,
                           expires_at, ttl_ms, maximum_lifetime_ms, execution_id, job_id,
                           request_id, metadata, state, ended_at, ended_by_principal_id,
                           ended_by_credential_id)
SELECT 'lease_' || md5(l.lock_key || g), l.lock_key, l.tenant_id, l.program_id,
       l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class,
       g, 'bench', 'pgbench', 'key_bench', 'si-seed', t, t, t + interval '30 s', 30000,
       3600000, 'e-seed', 'j', 'seed-h' || g || '-' || l.target_id, '{}', 'released',
       t + interval '1 s', 'bench', 'key_bench'
  FROM lease.locks l, generate_series(1, :hist) g,
       LATERAL (SELECT now() - interval '20 days' + g * interval '1 minute') AS at(t);

INSERT INTO lease.audit_events (occurred_at, event_type, decision, result_code, request_id,
                                execution_id, job_id, principal_class, principal_id,
                                credential_id, service_instance_id, tenant_id, program_id,
                                target_namespace, target_id, actor_name, workflow_name,
                                operation_class, lease_id, fencing_token, previous_state,
                                resulting_state)
SELECT now() - (g % 2592000) * interval '1 second',
       CASE WHEN g % 2 = 0 THEN 'target_lease_acquire' ELSE 'target_lease_release' END,
       'allow', CASE WHEN g % 2 = 0 THEN 'lease_acquired' ELSE 'lease_released' END,
       'seed-a' || g, 'e-seed', 'j', 'worker', 'bench', 'key_bench', 'si-seed', 'bench',
       'bench', 'bench', 't' || (1 + g % greatest(:n, 1)), 'bench', 'default', 'default',
       'lease_' || md5(g::text), 1 + g / 2,
       CASE WHEN g % 2 = 0 THEN 'free' ELSE 'active' END,
       CASE WHEN g % 2 = 0 THEN 'active' ELSE 'released' END
  FROM generate_series(1, :audit) g;
