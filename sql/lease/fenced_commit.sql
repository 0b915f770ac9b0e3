CREATE OR REPLACE FUNCTION lease.fenced_commit(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    t timestamptz := lease._now();
    i lease.identity;
    k text;
    l lease.locks;
    replay jsonb;
    field text;
    token bigint := lease._int(p -> 'fencing_token');
    x jsonb;
    idx integer := -1;
    cur bigint;
    rev bigint;
    oid bigint;
    results jsonb := '[]'::jsonb;
    result jsonb;
    why text;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    i := lease._identity(p -> 'lock_identity');
    field := lease._bad_lease_ref(p, i);
    IF field IS NULL AND NOT lease._id_ok(p -> 'execution_id') THEN
        field := 'execution_id';
    END IF;
    IF field IS NULL AND coalesce(jsonb_typeof(p -> 'trace_id'), 'null') <> 'null'
       AND NOT lease._id_ok(p -> 'trace_id') THEN
        field := 'trace_id';
    END IF;
    IF field IS NULL THEN
        field := lease._bad_writes(p -> 'writes');
    END IF;
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    why := lease._guard();
    IF why IS NOT NULL THEN
        RETURN lease._sealed_result(why);
    END IF;
    k := lease._key(i);
    replay := lease._replay(k, 'commit', p);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;

    PERFORM lease._bound_lock_wait(deadline);
    l := lease._fence(k, i, p ->> 'lease_id', token, p #>> '{principal,principal_id}',
                      p ->> 'execution_id');
    IF l.lock_key IS NULL THEN
        RETURN lease._result('lease_lost');
    END IF;

    -- every expected revision first: a conflict writes nothing
    FOR x IN SELECT value FROM jsonb_array_elements(p -> 'writes') LOOP
        idx := idx + 1;
        CONTINUE WHEN x ->> 'kind' <> 'document';
        SELECT d.revision INTO cur FROM lease.fenced_documents d
         WHERE d.lock_key = k AND d.document_key = x ->> 'key';
        IF coalesce(cur, 0) <> lease._int(x -> 'expected_revision') THEN
            RETURN jsonb_build_object('code', 'write_conflict',
                                      'field', 'writes[' || idx || '].expected_revision',
                                      'current_revision', coalesce(cur, 0));
        END IF;
    END LOOP;

    FOR x IN SELECT value FROM jsonb_array_elements(p -> 'writes') LOOP
        IF x ->> 'kind' = 'document' THEN
            INSERT INTO lease.fenced_documents AS d (lock_key, document_key, revision, body,
                fencing_token, lease_id, execution_id, trace_id, updated_at)
            VALUES (k, x ->> 'key', lease._int(x -> 'expected_revision') + 1, x -> 'body',
                    token, l.lease_id, l.execution_id, p ->> 'trace_id', t)
            ON CONFLICT (lock_key, document_key) DO UPDATE
               SET revision = EXCLUDED.revision, body = EXCLUDED.body,
                   fencing_token = EXCLUDED.fencing_token, lease_id = EXCLUDED.lease_id,
                   execution_id = EXCLUDED.execution_id, trace_id = EXCLUDED.trace_id,
                   updated_at = EXCLUDED.updated_at
            RETURNING d.revision INTO rev;
            results := results || jsonb_build_object('kind', 'document', 'key', x ->> 'key',
                                                     'revision', rev);
        ELSE
            INSERT INTO lease.outbox (lock_key, topic, payload, fencing_token, lease_id,
                                      execution_id, trace_id, created_at)
            VALUES (k, x ->> 'topic', x -> 'payload', token, l.lease_id, l.execution_id,
                    p ->> 'trace_id', t)
            RETURNING outbox_id INTO oid;
            results := results || jsonb_build_object('kind', 'publication',
                                                     'topic', x ->> 'topic', 'outbox_id', oid);
        END IF;
    END LOOP;
    PERFORM lease._accept_token(k, token);

    result := jsonb_build_object('code', 'commit_accepted', 'lease_id', l.lease_id,
                                 'fencing_token', token, 'results', results);
    PERFORM lease._audit(p, 'target_lease_commit', 'commit_accepted',
        jsonb_build_object('lock_identity', lease._identity_json(l.tenant_id, l.program_id,
                               l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
                               l.operation_class),
                           'lease_id', l.lease_id, 'fencing_token', token,
                           'service_instance_id', l.service_instance_id,
                           'execution_id', l.execution_id, 'job_id', l.job_id,
                           'trace_id', p ->> 'trace_id', 'previous_state', 'active',
                           'resulting_state', 'active'));
    -- after its audit event, which the idempotency record links to
    PERFORM lease._remember(k, 'commit', p, result);
    RETURN result || jsonb_build_object('replayed', false);
END
$function$;

COMMENT ON FUNCTION lease.fenced_commit(jsonb) IS
    'Applies documents and outbox rows only while the presented lease is the active, exact, unexpired lease (row locked FOR SHARE: a revoke waits for it, a later commit sees the revoke) and each document''s token is not below its high-water mark. Looks its request id up first: a repeated commit must not meet its own documents'' new revisions as a write_conflict.';

REVOKE ALL ON FUNCTION lease.fenced_commit(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.fenced_commit(jsonb) TO lease_service;
