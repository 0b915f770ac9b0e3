-- Schema objects, roles and privileges: what exists, who may execute or read
-- what (per role, and nothing for PUBLIC), SECURITY DEFINER hygiene, and the
-- service role's default isolation.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql

-- Every EXECUTE grant the migrations intend, per role. lease_admin also holds
-- lease_operator's privileges through membership.
CREATE TABLE t.exec_grants (role name, fn regprocedure);
INSERT INTO t.exec_grants
SELECT 'lease_service', f::regprocedure FROM unnest(ARRAY[
    'lease.acquire(jsonb)', 'lease.renew(jsonb,boolean)', 'lease.renew_many(jsonb)', 'lease.release(jsonb)', 'lease.release_many(jsonb)',
    'lease.renew_many_brief_typed(lease.identity[],lease.renew_request[])',
    'lease.release_many_brief_typed(lease.identity[],lease.release_request[])',
    'lease.acquire_brief_typed(lease.identity,lease.acquire_request,boolean)',
    'lease.renew_brief_typed(lease.identity,lease.renew_request,boolean)',
    'lease.release_brief_typed(lease.identity,lease.release_request)',
    'lease.force_release(jsonb)', 'lease.revoke(jsonb)', 'lease.inspect(jsonb)',
    'lease.list_by_owner(jsonb)', 'lease.list_by_target(jsonb)', 'lease.list_by_program(jsonb)',
    'lease.fenced_commit(jsonb)', 'lease.fence_check(jsonb,text,bigint,text)',
    'lease.sweep_expired(integer)', 'lease.purge_retention(integer)',
    'lease.expire_due(integer,bigint)', 'lease.purge_due(integer)',
    'lease.record_audit(jsonb)', 'lease.credential_lookup(text)',
    'lease.quarantine(text,text,text)', 'lease.health()', 'lease.check_namespace()',
    'lease.check_namespace(integer,integer,pg_lsn)',
    'lease.lock_key(text,text,text,text,text,text,text)',
    'lease.normalize_component(text,text)', 'lease.watch_ended(text[])',
    'lease.session_open(text,text,bigint,text,text,text,text,text,timestamp with time zone,text,text,integer)',
    'lease.session_keepalive(text,text,text,text,timestamp with time zone)',
    'lease.session_close(text,text,text,text,text,text,text,timestamp with time zone,text,text,integer)']) f
UNION ALL
SELECT r, f::regprocedure
  FROM unnest(ARRAY['lease_operator', 'lease_admin']) r,
       unnest(ARRAY['lease.lock_key(text,text,text,text,text,text,text)',
                    'lease.normalize_component(text,text)', 'lease.health()',
                    'lease.verify()']) f
UNION ALL
SELECT r, 'lease.outbox_lag()'::regprocedure FROM unnest(ARRAY['lease_operator', 'lease_admin']) r
UNION ALL
SELECT 'lease_admin', f::regprocedure FROM unnest(ARRAY[
    'lease.recover_epoch(text,bigint)', 'lease.admin_force_release(text,text)',
    'lease.admin_revoke(text,text,text)', 'lease.credential_create(jsonb)',
    'lease.credential_revoke(text)', 'lease.credential_list()', 'lease.check_namespace()',
    'lease.check_namespace(integer,integer,pg_lsn)',
    'lease.sweep_expired(integer)', 'lease.purge_retention(integer)',
    'lease.expire_due(integer,bigint)', 'lease.purge_due(integer)',
    'lease.outbox_discard(bigint,text)', 'lease.outbox_purge(bigint,integer)',
    'lease.outbox_requeue(bigint,text)']) f
UNION ALL
-- leased-relay's role (migrations/0012, docs/relay.md)
SELECT 'lease_relay', f::regprocedure FROM unnest(ARRAY[
    'lease.outbox_claim(integer)', 'lease.outbox_mark_published(bigint[],text)',
    'lease.outbox_mark_refused(bigint,text,text)', 'lease.outbox_defer(bigint,integer,text)',
    'lease.outbox_lag()', 'lease.outbox_purge(bigint,integer)',
    'lease.outbox_quarantine(bigint,text,text)']) f;

-- Table and view privileges per role, for every relation in the schema.
CREATE TABLE t.rel_grants (role name, rel name, privs name[]);
INSERT INTO t.rel_grants
SELECT r.role, c.relname,
       CASE
       WHEN r.role = 'lease_service' THEN ARRAY[]::name[]
       WHEN c.relname = 'policy' AND r.role = 'lease_admin' THEN ARRAY['SELECT', 'UPDATE']::name[]
       WHEN r.role = 'lease_relay' THEN ARRAY[]::name[]
       WHEN c.relname IN ('active_leases', 'lease_history', 'audit_log', 'fencing_counters',
                          'quarantined_records', 'policy', 'namespace_state',
                          'schema_migrations', 'schema_repeatables', 'recoveries',
                          'outbox_backlog', 'active_sessions')
            THEN ARRAY['SELECT']::name[]
       ELSE ARRAY[]::name[]
       END
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'lease'
 CROSS JOIN (VALUES ('lease_service'::name), ('lease_operator'), ('lease_admin'),
                    ('lease_relay')) r(role)
 WHERE c.relkind IN ('r', 'v');

GRANT SELECT ON t.exec_grants, t.rel_grants TO PUBLIC;

SELECT plan(41 + (SELECT count(*)::int FROM t.exec_grants)
               + (SELECT count(*)::int FROM t.rel_grants));

-- Objects ------------------------------------------------------------------
SELECT has_schema('lease');
SELECT tables_are('lease', ARRAY['policy', 'namespace_state', 'secrets', 'locks', 'history',
    'idempotency_keys', 'audit_events', 'credentials', 'fence_marks', 'fenced_documents', 'outbox',
    'quarantine', 'recoveries', 'schema_migrations', 'schema_repeatables', 'lease_index',
    'sessions']);
SELECT views_are('lease', ARRAY['active_leases', 'lease_history', 'audit_log',
    'fencing_counters', 'quarantined_records', '_settings', 'outbox_backlog', 'idempotency',
    'active_sessions']);
SELECT is((SELECT count(*)::int FROM t.exec_grants e
            WHERE NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.oid = e.fn)), 0,
          'every function named in the grants exists');
SELECT is((SELECT count(*)::int FROM lease.policy), 1, 'exactly one policy row');
SELECT is((SELECT count(*)::int FROM lease.namespace_state), 1, 'exactly one namespace row');
SELECT has_trigger('lease', 'audit_events', 'audit_events_append_only'::name,
                   'audit_events has its append-only row trigger');
SELECT has_trigger('lease', 'audit_events', 'audit_events_no_truncate'::name,
                   'audit_events has its no-truncate trigger');

-- Roles --------------------------------------------------------------------
SELECT has_role('lease_service');
SELECT has_role('lease_operator');
SELECT has_role('lease_admin');
SELECT is_member_of('lease_operator', 'lease_admin');
SELECT has_role('lease_relay');
SELECT is((SELECT rolcanlogin OR rolsuper OR rolcreaterole OR rolbypassrls FROM pg_roles
            WHERE rolname = 'lease_relay'), false,
          'lease_relay is a plain NOLOGIN group role');
SELECT is((SELECT rolcanlogin OR rolsuper OR rolcreaterole OR rolbypassrls FROM pg_roles
            WHERE rolname = 'lease_service'), false,
          'lease_service is a plain NOLOGIN group role');
SELECT is((SELECT setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
            WHERE r.rolname = 'lease_service' AND s.setdatabase = 0),
          ARRAY['default_transaction_isolation=serializable'],
          'lease_service defaults to SERIALIZABLE (pg_db_role_setting)');

-- Schema usage -------------------------------------------------------------
SELECT schema_privs_are('lease', 'lease_service', ARRAY['USAGE']);
SELECT schema_privs_are('lease', 'lease_operator', ARRAY['USAGE']);
SELECT schema_privs_are('lease', 'lease_admin', ARRAY['USAGE']);
SELECT schema_privs_are('lease', 'lease_relay', ARRAY['USAGE']);
SELECT is(has_schema_privilege('public', 'lease', 'USAGE'), false, 'PUBLIC has no USAGE on lease');

-- Function privileges: each intended grant, then the exact set per role ------
SELECT function_privs_are('lease', p.proname::name,
                          coalesce((SELECT array_agg(format_type(a, NULL)::name ORDER BY o)
                                      FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY x(a, o)),
                                   ARRAY[]::name[]),
                          e.role, ARRAY['EXECUTE'],
                          e.role || ' may execute ' || e.fn::text)
  FROM t.exec_grants e JOIN pg_proc p ON p.oid = e.fn
 ORDER BY e.role, e.fn::text;

SELECT set_eq(format($q$SELECT p.oid::regprocedure::text FROM pg_proc p
                         JOIN pg_namespace n ON n.oid = p.pronamespace
                        WHERE n.nspname = 'lease'
                          AND has_function_privilege(%L, p.oid, 'EXECUTE')$q$, r),
              format('SELECT fn::text FROM t.exec_grants WHERE role = %L', r),
              r || ' executes exactly its functions (no internal helper)')
  FROM unnest(ARRAY['lease_service', 'lease_operator', 'lease_admin', 'lease_relay']) r;
SELECT is_empty($q$SELECT p.oid::regprocedure::text FROM pg_proc p
                    JOIN pg_namespace n ON n.oid = p.pronamespace
                   WHERE n.nspname = 'lease'
                     AND has_function_privilege('public', p.oid, 'EXECUTE')$q$,
                'PUBLIC executes no lease function');

-- Table privileges ---------------------------------------------------------
SELECT table_privs_are('lease', g.rel, g.role, g.privs,
                       g.role || ' on lease.' || g.rel || ': '
                       || coalesce(nullif(array_to_string(g.privs, ', '), ''), 'nothing'))
  FROM t.rel_grants g ORDER BY g.role, g.rel;
SELECT is_empty($q$SELECT c.relname FROM pg_class c
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'lease' AND c.relkind IN ('r', 'v', 'S')
                     AND (has_table_privilege('public', c.oid, 'SELECT')
                          OR has_table_privilege('public', c.oid, 'INSERT')
                          OR has_table_privilege('public', c.oid, 'UPDATE')
                          OR has_table_privilege('public', c.oid, 'DELETE'))$q$,
                'PUBLIC can neither read nor write any lease relation');
SELECT is_empty($q$SELECT c.relname FROM pg_class c
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'lease' AND c.relkind = 'S'
                     AND (has_sequence_privilege('lease_service', c.oid, 'USAGE')
                          OR has_sequence_privilege('lease_operator', c.oid, 'USAGE')
                          OR has_sequence_privilege('lease_admin', c.oid, 'USAGE')
                          OR has_sequence_privilege('lease_relay', c.oid, 'USAGE'))$q$,
                'no role uses a lease sequence directly');

-- SECURITY DEFINER hygiene -------------------------------------------------
SELECT cmp_ok((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'lease' AND p.prosecdef), '>=', 25,
              'the operations are SECURITY DEFINER functions');
SELECT is_empty($q$SELECT p.oid::regprocedure::text FROM pg_proc p
                    JOIN pg_namespace n ON n.oid = p.pronamespace
                   WHERE n.nspname = 'lease' AND p.prosecdef
                     AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'],
                                      false)$q$,
                'every SECURITY DEFINER function pins search_path = pg_catalog, pg_temp');
SELECT is_empty($q$SELECT e.fn::text FROM t.exec_grants e JOIN pg_proc p ON p.oid = e.fn
                   WHERE e.role = 'lease_service' AND NOT p.prosecdef
                     AND e.fn <> 'lease.normalize_component(text,text)'::regprocedure$q$,
                'every function the service calls (except the pure normaliser) runs as definer');

-- Behaviour: the roles can do what the grants say, and no more ---------------
SET LOCAL ROLE lease_service;
SELECT throws_ok($$INSERT INTO lease.locks (lock_key) VALUES ('x')$$, '42501', NULL,
                 'lease_service cannot insert into lease.locks');
SELECT throws_ok($$SELECT count(*) FROM lease.locks$$, '42501', NULL,
                 'lease_service cannot read lease.locks');
SELECT throws_ok($$UPDATE lease.policy SET default_ttl_ms = 20000$$, '42501', NULL,
                 'lease_service cannot change the policy');
SELECT throws_ok($$SELECT lease._expire('x', 'x', 1)$$, '42501', NULL,
                 'lease_service cannot call an internal helper');
RESET ROLE;
SET LOCAL ROLE lease_operator;
SELECT lives_ok($$SELECT count(*) FROM lease.active_leases$$, 'lease_operator reads active_leases');
SELECT lives_ok($$SELECT count(*) FROM lease.active_sessions$$, 'lease_operator reads active_sessions');
SELECT throws_ok($$SELECT count(*) FROM lease.credentials$$, '42501', NULL,
                 'lease_operator cannot read credentials');
RESET ROLE;
SET LOCAL ROLE lease_admin;
SELECT lives_ok($$UPDATE lease.policy SET default_ttl_ms = 20000$$,
                'lease_admin may update the policy row');
RESET ROLE;
SET LOCAL ROLE lease_relay;
SELECT throws_ok($$UPDATE lease.outbox SET published_at = now()$$, '42501', NULL,
                 'lease_relay cannot write lease.outbox directly');
SELECT throws_ok($$SELECT lease.fenced_commit('{}')$$, '42501', NULL,
                 'lease_relay cannot commit');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
