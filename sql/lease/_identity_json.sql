CREATE OR REPLACE FUNCTION lease._identity_json(tenant_id text, program_id text, target_namespace text,
                                     target_id text, actor_name text, workflow_name text,
                                     operation_class text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('tenant_id', tenant_id, 'program_id', program_id,
                          'target_namespace', target_namespace, 'target_id', target_id,
                          'actor_name', actor_name, 'workflow_name', workflow_name,
                          'operation_class', operation_class);

COMMENT ON FUNCTION lease._identity_json(text,text,text,text,text,text,text) IS
    'The lock_identity object of stored columns, as answers carry it.';

REVOKE ALL ON FUNCTION lease._identity_json(text,text,text,text,text,text,text) FROM PUBLIC;
