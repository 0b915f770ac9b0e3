-- An experiment, not the schema: lease.renew_many_brief_typed deciding the
-- renewals of a typed batch with one statement (the checks of every item
-- as one CASE, one UPDATE joined to the valid items, one idempotency INSERT
-- and one audit INSERT for the renewed ones) in lease._renew_set, instead
-- of lease._renew_t once per item. For
--   tests/bench/callgrind/pair --typed --batch 10 --sql tests/bench/callgrind/set_renew_many_typed.sql
-- docs/benchmarks.md, "Issue 20: a typed set-based batch renewal, measured
-- and not kept", says what it measured and why the schema does not use it.
-- Two traps it shows: the identity must be computed in a CTE of its own
-- (lease._identity_fault on an inlined lease._identity_text is a call
-- through the SQL function executor per row, its body read again each
-- time), and the join must stay a nested loop over locks_pkey (the
-- function's enable_* settings; a hash join would scan lease.locks and
-- take a predicate lock on all of it).
CREATE OR REPLACE FUNCTION lease._renew_set(
    tenant_id text[], program_id text[], target_namespace text[], target_id text[],
    actor_name text[], workflow_name text[], operation_class text[], lease_id text[],
    fencing_token bigint[], ttl_ms bigint[], service_instance_id text[], principal_id text[],
    principal_class text[], credential_id text[], request_id text[], request_digest text[],
    deadline_at timestamptz[], correlation_id text[], trace_id text[], deadline_class text[],
    latency_ms integer[], brief boolean, s lease._settings, identity_error text[])
 RETURNS jsonb[]
 LANGUAGE plpgsql
 SET plan_cache_mode TO force_generic_plan
 SET enable_seqscan TO off
 SET enable_hashjoin TO off
 SET enable_mergejoin TO off
AS $function$
DECLARE
    sealed text;
    answers jsonb[];
    late integer[];
BEGIN
    IF s.guard_needed THEN
        sealed := lease._guard();
    END IF;
    WITH v AS MATERIALIZED (
        SELECT v.*, lease._identity_text(v.t, v.p, v.ns, v.tg, v.a, v.w, v.o) AS i
          FROM unnest(tenant_id, program_id, target_namespace, target_id, actor_name,
                      workflow_name, operation_class, lease_id, fencing_token, ttl_ms,
                      service_instance_id, principal_id, principal_class, credential_id,
                      request_id, request_digest, deadline_at, correlation_id, trace_id,
                      deadline_class, latency_ms, identity_error)
               WITH ORDINALITY AS v(t, p, ns, tg, a, w, o, l, f, ttl, si, pi, pc, ci, ri, rd,
                                    dl, co, tr, dc, lm, ie, n)),
    u AS MATERIALIZED (
        SELECT v.*,
               CASE WHEN now() >= lease._call_deadline_t(v.dl, v.pi, v.ri, v.rd)
                        THEN lease._result('deadline_exceeded')
                    WHEN c.field IS NOT NULL THEN lease._invalid(c.field)
                    WHEN v.ttl IS NOT NULL
                         AND NOT (v.ttl > s.minimum_ttl_ms AND v.ttl <= s.maximum_ttl_ms)
                        THEN lease._invalid('ttl_ms', 'ttl_ms must be greater than '
                                                      || s.minimum_ttl_ms || ' and at most '
                                                      || s.maximum_ttl_ms)
                    WHEN sealed IS NOT NULL THEN lease._sealed_result(sealed)
                    WHEN NOT lease._lock_wait_until(v.dl) THEN lease._result('deadline_exceeded')
               END AS early
          FROM v
         CROSS JOIN LATERAL (SELECT coalesce(v.ie, lease._identity_fault(v.i), CASE
                 WHEN NOT lease._id_text_ok(v.l) THEN 'lease_id'
                 WHEN coalesce(v.f, 0) <= 0 THEN 'fencing_token'
                 WHEN NOT lease._id_text_ok(v.si) THEN 'service_instance_id'
                 END) AS field) c),
    w AS (
        SELECT u.*, k.k, lease._canonical_of((u.i).tenant_id, (u.i).program_id, (u.i).target_namespace,
                                   (u.i).target_id, (u.i).actor_name, (u.i).workflow_name,
                                   (u.i).operation_class) AS c,
               row_number() OVER (PARTITION BY k.k ORDER BY u.n) = 1 AS first
          FROM u CROSS JOIN LATERAL (SELECT lease._key(u.i) AS k) k
         WHERE u.early IS NULL),
    upd AS (
        UPDATE lease.locks AS x
           SET renewed_at = lease._now(),
               expires_at = least(lease._now() + lease._ms(coalesce(w.ttl, x.ttl_ms)),
                                  x.acquired_at + lease._ms(x.maximum_lifetime_ms)),
               ttl_ms = coalesce(w.ttl, x.ttl_ms)
          FROM w
         WHERE w.first AND x.lock_key = w.k AND x.state = 'active' AND x.expires_at > now()
           AND x.record_version = 1 AND x.lease_id = w.l
           AND x.fencing_token = w.f
           AND x.owner_principal_id = w.pi
           AND x.service_instance_id = w.si
           AND lease._canonical_of(x.tenant_id, x.program_id, x.target_namespace, x.target_id,
                                   x.actor_name, x.workflow_name, x.operation_class) = w.c
        RETURNING w.n, w.pi, w.ri, w.rd, w.co, w.tr, w.dc, w.lm, w.pc, w.ci, w.ttl, x AS row,
                  jsonb_build_object('code', 'lease_renewed', 'lease',
                                     CASE WHEN brief THEN lease._renewed_json(x)
                                          ELSE lease._lease_json(x) END) AS result),
    rem AS (
        INSERT INTO lease.idempotency (lock_key, operation, owner_principal_id, request_id,
                                       request_digest, result, lease_id, created_at, expires_at)
        SELECT (upd.row).lock_key, 'renew', upd.pi, upd.ri, decode(upd.rd, 'hex'), upd.result,
               (upd.row).lease_id, lease._now(), lease._now() + lease._ms(s.idempotency_retention_ms)
          FROM upd),
    aud AS (
        INSERT INTO lease.audit_events (
            latency_ms, event_type, priority, decision, result_code, request_id, correlation_id,
            trace_id, execution_id, job_id, principal_class, principal_id, credential_id,
            service_instance_id, tenant_id, program_id, target_namespace, target_id, actor_name,
            workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
            effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id)
        SELECT upd.lm, 'target_lease_renew', 'normal', 'allow', 'lease_renewed', upd.ri,
               left(upd.co, 64), coalesce(upd.tr, (upd.row).trace_id), (upd.row).execution_id,
               (upd.row).job_id, left(upd.pc, 16), upd.pi, left(upd.ci, 128),
               (upd.row).service_instance_id, (upd.row).tenant_id, (upd.row).program_id,
               (upd.row).target_namespace, (upd.row).target_id, (upd.row).actor_name,
               (upd.row).workflow_name, (upd.row).operation_class, (upd.row).lease_id,
               (upd.row).fencing_token, upd.ttl, (upd.row).ttl_ms, left(upd.dc, 16), 'active',
               'active', NULL, NULL
          FROM upd)
    SELECT array_agg(coalesce(u.early,
                              upd.result || '{"replayed": false, "current_state": "active"}'::jsonb)
                     ORDER BY u.n)
      INTO answers
      FROM u LEFT JOIN upd ON upd.n = u.n;
    -- NOT BUILT (a measurement): items that name a lease an earlier item of
    -- the batch names, and items whose write matched nothing (lease_lost or
    -- a replay, lease._unmatched_t), answer JSON null here. The measured
    -- renewals are all first-named and matched (pair checks each answer).
    RETURN answers;
END
$function$;

CREATE OR REPLACE FUNCTION lease.renew_many_brief_typed(
    tenant_id text[], program_id text[], target_namespace text[], target_id text[],
    actor_name text[], workflow_name text[], operation_class text[], lease_id text[],
    fencing_token bigint[], ttl_ms bigint[], service_instance_id text[], principal_id text[],
    principal_class text[], credential_id text[], request_id text[], request_digest text[],
    deadline_at timestamptz[], correlation_id text[], trace_id text[], deadline_class text[],
    latency_ms integer[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s lease._settings;
BEGIN
    SELECT * INTO s FROM lease._settings;
    RETURN jsonb_build_object('results', to_jsonb(lease._renew_set(tenant_id, program_id, target_namespace, target_id, actor_name,
                      workflow_name, operation_class, lease_id, fencing_token, ttl_ms,
                      service_instance_id, principal_id, principal_class, credential_id,
                      request_id, request_digest, deadline_at, correlation_id, trace_id,
                      deadline_class, latency_ms, true, s, NULL)));
END
$function$;
