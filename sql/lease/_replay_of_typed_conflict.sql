CREATE OR REPLACE FUNCTION lease._replay_of_typed_conflict(
    constraint_name text, op text, tenant_id text, program_id text, target_namespace text,
    target_id text, actor_name text, workflow_name text, operation_class text,
    principal_id text, request_id text, request_digest text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
RETURN CASE WHEN constraint_name = 'idempotency_pkey'
            THEN lease._replay_t(lease.lock_key(tenant_id, program_id, target_namespace,
                                                target_id, actor_name, workflow_name,
                                                coalesce(operation_class, 'default')),
                                 op, principal_id, request_id, request_digest) END;

COMMENT ON FUNCTION lease._replay_of_typed_conflict(text,text,text,text,text,text,text,text,text,text,text,text) IS
    'The one answer to a unique violation of a renewal or an ending: the stored answer (lease._replay_t) when it was idempotency''s primary key (a repeated request id whose lease still matched), NULL otherwise (the caller re-raises). Called from the one block of each decider, lease.renew_brief_typed (renewals) and lease._end_t (endings), whichever form the request came in: one replay path.';

REVOKE ALL ON FUNCTION lease._replay_of_typed_conflict(text,text,text,text,text,text,text,text,text,text,text,text) FROM PUBLIC;
