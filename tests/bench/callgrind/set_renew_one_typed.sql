-- An experiment, not the schema: every renewal, single ones too, through
-- set_renew_many_typed.sql's lease._renew_set (lease._renew_t as its batch of
-- one). For
--   tests/bench/callgrind/pair --typed --renew --sql tests/bench/callgrind/set_renew_one_typed.sql
-- docs/benchmarks.md, "Issue 20: a typed set-based batch renewal, measured
-- and not kept".
\ir set_renew_many_typed.sql

CREATE OR REPLACE FUNCTION lease._renew_t(
    tenant_id text, program_id text, target_namespace text, target_id text, actor_name text,
    workflow_name text, operation_class text, lease_id text, fencing_token bigint, ttl_ms bigint,
    service_instance_id text, principal_id text, principal_class text, credential_id text,
    request_id text, request_digest text, deadline_at timestamptz, correlation_id text,
    trace_id text, deadline_class text, latency_ms integer, brief boolean, s lease._settings)
 RETURNS jsonb
 LANGUAGE sql
RETURN (lease._renew_set(ARRAY[tenant_id], ARRAY[program_id], ARRAY[target_namespace], ARRAY[target_id],
    ARRAY[actor_name], ARRAY[workflow_name], ARRAY[operation_class], ARRAY[lease_id], ARRAY[fencing_token],
    ARRAY[ttl_ms], ARRAY[service_instance_id], ARRAY[principal_id], ARRAY[principal_class],
    ARRAY[credential_id], ARRAY[request_id], ARRAY[request_digest], ARRAY[deadline_at],
    ARRAY[correlation_id], ARRAY[trace_id], ARRAY[deadline_class], ARRAY[latency_ms], brief, s,
    NULL))[1];
