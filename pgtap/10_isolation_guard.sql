-- The isolation guard: every operation refuses to run below SERIALIZABLE
-- (LS002), before deciding or writing anything. This file runs at READ
-- COMMITTED on purpose.
BEGIN ISOLATION LEVEL READ COMMITTED;
\ir helpers/fixtures.psql
SELECT plan(27);

SELECT is(current_setting('transaction_isolation'), 'read committed', 'this transaction is READ COMMITTED');

-- a live lease to aim the calls at, written directly (acquire would refuse)
INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
                         workflow_name, operation_class, fencing_counter, created_at, state, lease_id,
                         fencing_token, owner_principal_id, owner_client_id, owner_credential_id,
                         service_instance_id, acquired_at, renewed_at, expires_at, ttl_ms,
                         maximum_lifetime_ms, execution_id, job_id, trace_id, request_id, metadata)
VALUES (t.key(t.ident()), 'tenant-main', 'program-a', 'starintel-target', 'target_01', 'usernamegen',
        'default', 'default', 1, now(), 'active', 'lease_rc', 1, 'p1', 'client-p1', 'cred-p1', 'inst-1',
        date_trunc('milliseconds', now()), date_trunc('milliseconds', now()),
        date_trunc('milliseconds', now()) + interval '30 s', 30000, 3600000, 'exec-1', 'job-1',
        'trace-1', 'req-0', '{}');
SELECT jsonb_build_object('lease', jsonb_build_object('lock_identity', t.ident(), 'lease_id', 'lease_rc',
                          'fencing_token', 1, 'service_instance_id', 'inst-1', 'owner_principal_id', 'p1',
                          'execution_id', 'exec-1')) AS a1 \gset
SELECT t.snapshot() AS before \gset

SET LOCAL ROLE lease_service;
SELECT throws_ok(format('SELECT lease.%s(%L::jsonb)', op, q), 'LS002', NULL, 'lease.' || op || ' refuses READ COMMITTED')
  FROM (VALUES ('acquire', t.acq()),
               ('renew', t.ref(:'a1'::jsonb)),
               ('release', t.ref(:'a1'::jsonb)),
               ('force_release', t.admin(:'a1'::jsonb)),
               ('revoke', t.admin(:'a1'::jsonb)),
               ('inspect', t.req(jsonb_build_object('lock_identity', t.ident(), 'scope', t.scope()))),
               ('list_by_owner', t.req(jsonb_build_object('scope', t.scope(), 'tenant_id', 'tenant-main',
                                                          'program_id', 'program-a', 'owner_principal_id', 'p1'))),
               ('list_by_target', t.req(jsonb_build_object('scope', t.scope(), 'tenant_id', 'tenant-main',
                                                           'program_id', 'program-a', 'target_namespace',
                                                           'starintel-target', 'target_id', 'target_01'))),
               ('list_by_program', t.req(jsonb_build_object('scope', t.scope(), 'tenant_id', 'tenant-main',
                                                            'program_id', 'program-a'))),
               ('fenced_commit', t.commit_req(:'a1'::jsonb, jsonb_build_array(t.pub('x')))),
               ('record_audit', '[{"event_type":"target_lease_inspect","decision":"allow","result_code":"lease_inspected"}]'::jsonb)
       ) v(op, q);
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident(), 'lease_rc'), 'LS002', NULL,
                 'lease.fence_check refuses READ COMMITTED');
SELECT throws_ok('SELECT lease.sweep_expired(10)', 'LS002', NULL, 'lease.sweep_expired refuses READ COMMITTED');
SELECT throws_ok('SELECT lease.purge_retention(10)', 'LS002', NULL, 'lease.purge_retention refuses READ COMMITTED');
SELECT throws_ok($$SELECT lease.credential_lookup('key_aaaaaaaaaaaaaaaaaaaaaaaaaa')$$, 'LS002', NULL,
                 'lease.credential_lookup refuses READ COMMITTED');
SELECT throws_ok(format('SELECT lease.quarantine(%L, %L, %L)', t.key(t.ident()), 'acquire', 'test'), 'LS002', NULL,
                 'lease.quarantine refuses READ COMMITTED');
SELECT throws_ok('SELECT lease.check_namespace()', 'LS002', NULL, 'lease.check_namespace refuses READ COMMITTED');
SELECT ok((lease.health() ->> 'active_leases')::int = 1, 'lease.health (read-only report) works at any isolation');
RESET ROLE;

SET LOCAL ROLE lease_admin;
SELECT throws_ok($$SELECT lease.recover_epoch('restore drill')$$, 'LS002', NULL,
                 'lease.recover_epoch refuses READ COMMITTED');
SELECT throws_ok($$SELECT lease.credential_create('{"credential_id":"key_aaaaaaaaaaaaaaaaaaaaaaaaaa"}')$$, 'LS002', NULL,
                 'lease.credential_create refuses READ COMMITTED');
SELECT throws_ok($$SELECT lease.credential_revoke('key_aaaaaaaaaaaaaaaaaaaaaaaaaa')$$, 'LS002', NULL,
                 'lease.credential_revoke refuses READ COMMITTED');
SELECT throws_ok($$SELECT lease.admin_force_release('lease_rc', 'maintenance')$$, 'LS002', NULL,
                 'lease.admin_force_release refuses READ COMMITTED');
SELECT throws_ok($$SELECT lease.admin_revoke('lease_rc', 'incident')$$, 'LS002', NULL,
                 'lease.admin_revoke refuses READ COMMITTED');
SELECT throws_ok($$SELECT lease.admin_force_release('lease_unknown', 'maintenance')$$, 'LS002', NULL,
                 'lease.admin_force_release refuses READ COMMITTED before looking the lease up');
SELECT throws_ok($$SELECT lease.admin_revoke('lease_unknown', 'incident')$$, 'LS002', NULL,
                 'lease.admin_revoke refuses READ COMMITTED before looking the lease up');
RESET ROLE;

SELECT is(t.snapshot(), :'before', 'nothing was written by any refused call');

SELECT * FROM finish();
ROLLBACK;
