-- Every function granted to lease_service, lease_operator or lease_admin
-- runs when that role calls it (SET ROLE), and gives its typed answer.
-- has_function_privilege is not enough: a SECURITY INVOKER function that is
-- granted but calls an ungranted helper fails at run time (0011 fixed
-- lease.normalize_component, which called lease._fold).
--
-- The (role, function) pairs come from the catalog, so a new grant is
-- covered at once: it needs a call in t.calls below, or the test "every
-- granted function has a call here" fails naming it. Each call runs in a
-- subtransaction that is rolled back afterwards, so calls are independent
-- of each other and of their order.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql

-- What the calls work on, made as the owner: one live lease of principal
-- p1 and one credential.
CREATE TABLE t.fx (held jsonb, credential_id text);
INSERT INTO t.fx
SELECT lease.acquire(t.acq('target_calls')), 'key_' || repeat('a', 26);
SELECT lease.credential_create(jsonb_build_object(
    'credential_id', 'key_' || repeat('a', 26), 'principal_id', 'prn_calls',
    'client_id', 'cl_calls', 'tenant_id', 'tenant-main', 'program_id', 'program-a',
    'actor_names', jsonb_build_array('*'), 'capabilities', jsonb_build_array('targets:lease'),
    'secret_digest', repeat('0', 64))) IS NOT NULL AS made \gset

CREATE FUNCTION t.held() RETURNS jsonb LANGUAGE sql STABLE RETURN (SELECT held FROM t.fx);
CREATE FUNCTION t.held_id() RETURNS text LANGUAGE sql STABLE
RETURN (SELECT held #>> '{lease,lease_id}' FROM t.fx);

-- The SQLSTATE a statement raises (NULL: none). The housekeeping steps run
-- at READ COMMITTED only (pgtap/40_housekeeping_bounded_oldest_first.sql,
-- 41_housekeeping_isolation.sql): in this SERIALIZABLE transaction their
-- typed answer is the refusal LS020, which they give after the role's
-- EXECUTE privilege let them start (a missing privilege is 42501).
CREATE FUNCTION t.sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

-- One call per granted function: a query returning true when the answer
-- is the one expected.
CREATE TABLE t.calls (fn regprocedure PRIMARY KEY, q text NOT NULL);
INSERT INTO t.calls VALUES
('lease.normalize_component(text,text)',
 $q$SELECT lease.normalize_component('tenant_id', 'Tenant-Main') = 'tenant-main'
       AND lease.normalize_component('target_namespace', 'StarIntel-Target') = 'starintel-target'
       AND lease.normalize_component('operation_class', NULL) = 'default'
       AND lease.normalize_component('actor_name', 'bad actor') IS NULL$q$),
('lease.lock_key(text,text,text,text,text,text,text)',
 $q$SELECT lease.lock_key('tenant-main', 'program-a', 'starintel-target', 'target_01',
                          'usernamegen', 'default', 'default')
       = 'starintel:target-lease:v1:6UMHT_RTstSuGcqfVUzB0pc9lxli2lxUAbN_RNKMpBY'$q$),
('lease.health()', $q$SELECT (lease.health() ->> 'active_leases')::int >= 1$q$),
('lease.watch_ended(text[])',
 $q$SELECT lease.watch_ended(ARRAY[t.held_id(), 'lease_gone']) = '["lease_gone"]'::jsonb$q$),
('lease.verify()', $q$SELECT count(*) >= 0 FROM lease.verify()$q$),
('lease.session_open(text,text,bigint,text,text,text,text,text,timestamp with time zone,text,text,integer)',
 $q$SELECT lease.session_open('tenant-main', 'inst-1', NULL, 'p1', 'cred-p1', 'worker', 'ses-open',
                              repeat('a', 64), now() + interval '1 minute', NULL, NULL, NULL)
           ->> 'code' = 'lease_acquired'$q$),
('lease.session_keepalive(text,text,text,text,timestamp with time zone)',
 $q$SELECT lease.session_keepalive(lease.session_open('tenant-main', 'inst-1', NULL, 'p1',
               'cred-p1', 'worker', 'ses-keep', repeat('a', 64), now() + interval '1 minute',
               NULL, NULL, NULL) #>> '{session,session_id}', 'tenant-main', 'p1', 'cred-p1',
           now() + interval '1 minute') ->> 'code' = 'lease_renewed'$q$),
('lease.session_close(text,text,text,text,text,text,text,timestamp with time zone,text,text,integer)',
 $q$SELECT lease.session_close(lease.session_open('tenant-main', 'inst-1', NULL, 'p1',
               'cred-p1', 'worker', 'ses-close', repeat('a', 64), now() + interval '1 minute',
               NULL, NULL, NULL) #>> '{session,session_id}', 'tenant-main', 'p1', 'cred-p1',
           'worker', 'ses-close', repeat('b', 64), now() + interval '1 minute', NULL, NULL, NULL)
           ->> 'code' = 'lease_released'$q$),
('lease.acquire(jsonb)', $q$SELECT t.acquire('target_calls_2') ->> 'code' = 'lease_acquired'$q$),
('lease.renew(jsonb,boolean)', $q$SELECT lease.renew(t.ref(t.held())) ->> 'code' = 'lease_renewed'$q$),
('lease.renew_many(jsonb)',
 $q$SELECT lease.renew_many(jsonb_build_object('renewals', jsonb_build_array(t.ref(t.held()))))
           #>> '{results,0,code}' = 'lease_renewed'$q$),
('lease.renew_many_brief_typed(lease.identity[],lease.renew_request[])',
 $q$SELECT t.renew_many_typed(jsonb_build_array(t.ref(t.held()))) #>> '{results,0,code}' = 'lease_renewed'$q$),
('lease.release_many_brief_typed(lease.identity[],lease.release_request[])',
 $q$SELECT t.release_many_typed(jsonb_build_array(t.ref(t.held()))) #>> '{results,0,code}' = 'lease_released'$q$),
('lease.release(jsonb)', $q$SELECT lease.release(t.ref(t.held())) ->> 'code' = 'lease_released'$q$),
('lease.renew_brief_typed(lease.identity,lease.renew_request,boolean)',
 $q$SELECT t.renew_typed(t.ref(t.held())) ->> 'code' = 'lease_renewed'$q$),
('lease.release_brief_typed(lease.identity,lease.release_request)',
 $q$SELECT t.release_typed(t.ref(t.held())) ->> 'code' = 'lease_released'$q$),
('lease.acquire_brief_typed(lease.identity,lease.acquire_request,boolean)',
 $q$SELECT t.acquire_typed(t.acq('target_calls_typed')) ->> 'code' = 'lease_acquired'$q$),
('lease.release_many(jsonb)',
 $q$SELECT lease.release_many(jsonb_build_object('releases', jsonb_build_array(t.ref(t.held()))))
           #>> '{results,0,code}' = 'lease_released'$q$),
('lease.force_release(jsonb)',
 $q$SELECT lease.force_release(t.admin(t.held())) ->> 'code' = 'lease_released'$q$),
('lease.revoke(jsonb)', $q$SELECT lease.revoke(t.admin(t.held())) ->> 'code' = 'lease_revoked'$q$),
('lease.inspect(jsonb)',
 $q$SELECT lease.inspect(t.req(jsonb_build_object('lock_identity', t.ident('target_calls'),
                                                 'scope', t.scope()))) ->> 'code'
       = 'lease_inspected'$q$),
('lease.list_by_owner(jsonb)',
 $q$SELECT jsonb_array_length(lease.list_by_owner(t.req(jsonb_build_object(
           'scope', t.scope(), 'tenant_id', 'tenant-main', 'program_id', 'program-a',
           'owner_principal_id', 'p1', 'page_token', NULL))) -> 'leases') = 1$q$),
('lease.list_by_target(jsonb)',
 $q$SELECT jsonb_array_length(lease.list_by_target(t.req(jsonb_build_object(
           'scope', t.scope(), 'tenant_id', 'tenant-main', 'program_id', 'program-a',
           'target_namespace', 'starintel-target', 'target_id', 'target_calls',
           'page_token', NULL))) -> 'leases') = 1$q$),
('lease.list_by_program(jsonb)',
 $q$SELECT jsonb_array_length(lease.list_by_program(t.req(jsonb_build_object(
           'scope', t.scope(), 'tenant_id', 'tenant-main', 'program_id', 'program-a',
           'page_token', NULL))) -> 'leases') = 1$q$),
('lease.fenced_commit(jsonb)',
 $q$SELECT lease.fenced_commit(t.commit_req(t.held(), jsonb_build_array(t.doc('doc/calls', 0))))
       ->> 'code' = 'commit_accepted'$q$),
('lease.fence_check(jsonb,text,bigint,text)',
 $q$SELECT lease.fence_check(t.ident('target_calls'), t.held_id(), 1, 'p1') > now()$q$),
('lease.sweep_expired(integer)', $q$SELECT lease.sweep_expired(10) ? 'expired'$q$),
('lease.purge_retention(integer)', $q$SELECT jsonb_typeof(lease.purge_retention(10)) = 'object'$q$),
('lease.expire_due(integer,bigint)', $q$SELECT t.sqlstate_of('SELECT lease.expire_due(10, 0)') = 'LS020'$q$),
('lease.purge_due(integer)', $q$SELECT t.sqlstate_of('SELECT lease.purge_due(10)') = 'LS020'$q$),
('lease.record_audit(jsonb)',
 $q$SELECT lease.record_audit('[{"event_type":"target_lease_inspect","decision":"allow",
                                 "result_code":"lease_inspected"}]') = 1$q$),
('lease.credential_lookup(text)',
 $q$SELECT lease.credential_lookup('key_' || repeat('a', 26)) ->> 'principal_id' = 'prn_calls'$q$),
('lease.quarantine(text,text,text)',
 $q$SELECT lease.quarantine(t.key(t.ident('target_calls')), 'acquire', 'role call test') > 0$q$),
('lease.check_namespace()', $q$SELECT jsonb_typeof(lease.check_namespace()) = 'object'$q$),
('lease.check_namespace(integer,integer,pg_lsn)',
 $q$SELECT lease.check_namespace(0, 1, '0/0') ->> 'sealed' = 'false'$q$),
('lease.recover_epoch(text,bigint)',
 $q$SELECT jsonb_typeof(lease.recover_epoch('role call test')) = 'object'$q$),
('lease.admin_force_release(text,text)',
 $q$SELECT lease.admin_force_release(t.held_id(), 'role call test') ->> 'code' = 'lease_released'$q$),
('lease.admin_revoke(text,text,text)',
 $q$SELECT lease.admin_revoke(t.held_id(), 'role call test', 'INC-1') ->> 'code' = 'lease_revoked'$q$),
('lease.credential_create(jsonb)',
 $q$SELECT lease.credential_create(jsonb_build_object(
           'credential_id', 'key_' || repeat('b', 26), 'principal_id', 'prn_calls_2',
           'client_id', 'cl_calls', 'tenant_id', 'tenant-main', 'program_id', 'program-a',
           'actor_names', jsonb_build_array('*'),
           'capabilities', jsonb_build_array('targets:read'),
           'secret_digest', repeat('1', 64))) ->> 'credential_id' = 'key_' || repeat('b', 26)$q$),
('lease.credential_revoke(text)', $q$SELECT lease.credential_revoke('key_' || repeat('a', 26))$q$),
('lease.credential_list()',
 $q$SELECT jsonb_path_exists(lease.credential_list(), '$[*] ? (@.principal_id == "prn_calls")')$q$),
-- the outbox relay's functions that operators and administrators hold
-- (the relay role's own calls, at READ COMMITTED, are pgtap/17_outbox_relay.sql)
('lease.outbox_lag()', $q$SELECT (SELECT unpublished >= 0 AND deferred = 0 FROM lease.outbox_lag())$q$),
('lease.outbox_discard(bigint,text)', $q$SELECT lease.outbox_discard(-1, 'role call test') = 0$q$),
('lease.outbox_requeue(bigint,text)', $q$SELECT lease.outbox_requeue(-1, 'role call test') = 0$q$),
('lease.outbox_purge(bigint,integer)', $q$SELECT lease.outbox_purge(0, 10) >= 0$q$);

-- Runs q as the current role in a subtransaction that is always rolled
-- back; returns 'ran', 'ran, unexpected answer', or the SQLSTATE and
-- message it raised.
CREATE FUNCTION t.run_call(q text) RETURNS text LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer boolean;
    outcome text;
BEGIN
    BEGIN
        EXECUTE q INTO answer;
        outcome := CASE WHEN answer THEN 'ran' ELSE 'ran, unexpected answer' END;
        RAISE EXCEPTION USING ERRCODE = 'TT001';  -- undo what the call did
    EXCEPTION WHEN SQLSTATE 'TT001' THEN
        RETURN outcome;
    END;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- Every (role, granted function) pair, from the catalog.
CREATE VIEW t.granted AS
SELECT r.role, p.oid::regprocedure AS fn
  FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = 'lease'
 CROSS JOIN (VALUES ('lease_service'::name), ('lease_operator'), ('lease_admin')) r(role)
 WHERE has_function_privilege(r.role, p.oid, 'EXECUTE');

GRANT SELECT ON t.fx, t.calls, t.granted TO PUBLIC;

SELECT plan(4 + (SELECT count(*)::int FROM t.granted g JOIN t.calls c USING (fn)));

SELECT ok(:'made', 'the fixture credential exists');
SELECT is_empty($$SELECT role || ' ' || fn::text FROM t.granted
                  WHERE fn NOT IN (SELECT fn FROM t.calls)$$,
                'every granted function has a call here');
SELECT cmp_ok((SELECT count(DISTINCT role)::int FROM t.granted), '=', 3,
              'each of the three roles is granted functions');

SET LOCAL ROLE lease_service;
SELECT is(t.run_call(c.q), 'ran', 'lease_service calls ' || c.fn::text)
  FROM t.granted g JOIN t.calls c USING (fn)
 WHERE g.role = 'lease_service' ORDER BY c.fn::text;
RESET ROLE;

SET LOCAL ROLE lease_operator;
SELECT is(t.run_call(c.q), 'ran', 'lease_operator calls ' || c.fn::text)
  FROM t.granted g JOIN t.calls c USING (fn)
 WHERE g.role = 'lease_operator' ORDER BY c.fn::text;
RESET ROLE;

SET LOCAL ROLE lease_admin;
SELECT is(t.run_call(c.q), 'ran', 'lease_admin calls ' || c.fn::text)
  FROM t.granted g JOIN t.calls c USING (fn)
 WHERE g.role = 'lease_admin' ORDER BY c.fn::text;
RESET ROLE;

-- The rollbacks really undid the calls: the fixture lease is still live.
SELECT is((SELECT state FROM lease.locks WHERE lease_id = t.held_id()), 'active',
          'the calls left the fixture lease as it was');

SELECT * FROM finish();
ROLLBACK;
