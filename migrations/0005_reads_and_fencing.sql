-- 0005: inspect, the three lists, and fencing (fence_check, fenced_commit).

-- Whether an identity lies in a caller's scope:
-- {"tenant_id": T, "program_id": P or "*", "actor_names": [..] or ["*"]}.
CREATE FUNCTION lease._in_scope(tenant_id text, program_id text, actor_name text, scope jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(tenant_id = scope ->> 'tenant_id'
                AND (scope ->> 'program_id' = '*' OR program_id = scope ->> 'program_id')
                AND (scope -> 'actor_names' ? '*' OR scope -> 'actor_names' ? actor_name),
                false);

CREATE FUNCTION lease._check_scope(scope jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF jsonb_typeof(scope) IS DISTINCT FROM 'object'
       OR jsonb_typeof(scope -> 'tenant_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(scope -> 'program_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(scope -> 'actor_names') IS DISTINCT FROM 'array' THEN
        PERFORM lease._malformed('scope missing');
    END IF;
END
$$;

-- Inspect by lock identity (its live lease) or by lease id (live or
-- terminal). Anything outside the caller's scope is lease_not_found.
CREATE FUNCTION lease.inspect(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, false);
    scope jsonb := p -> 'scope';
    i lease.identity;
    l lease.locks;
    h lease.history;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    PERFORM lease._check_scope(scope);
    IF coalesce(jsonb_typeof(p -> 'lock_identity'), 'null') <> 'null' THEN
        i := lease._identity(p -> 'lock_identity');
        IF i.bad_field IS NOT NULL THEN
            RETURN lease._invalid(i.bad_field);
        END IF;
        l := lease._row(lease._key(i), i);
    ELSIF lease._id_ok(p -> 'lease_id') THEN
        SELECT l2.* INTO l FROM lease.lease_index x JOIN lease.locks l2 USING (lock_key)
         WHERE x.lease_id = p ->> 'lease_id' AND l2.lease_id = x.lease_id;
        IF l.lock_key IS NULL THEN
            SELECT * INTO h FROM lease.history WHERE lease_id = p ->> 'lease_id';
            IF h.lease_id IS NOT NULL
               AND lease._in_scope(h.tenant_id, h.program_id, h.actor_name, scope) THEN
                RETURN jsonb_build_object('code', 'lease_inspected', 'lease', lease._history_json(h));
            END IF;
            RETURN lease._result('lease_not_found');
        END IF;
        IF l.lock_key <> lease._key(ROW(l.tenant_id, l.program_id, l.target_namespace,
                                         l.target_id, l.actor_name, l.workflow_name,
                                         l.operation_class, NULL)::lease.identity) THEN
            PERFORM lease._corrupt(l.lock_key, 'lock key does not match the stored tuple');
        END IF;
    ELSIF p ? 'lease_id' THEN
        RETURN lease._invalid('lease_id');
    ELSE
        RETURN lease._invalid('lock_identity');
    END IF;
    IF l.lock_key IS NULL OR l.state <> 'active'
       OR NOT lease._in_scope(l.tenant_id, l.program_id, l.actor_name, scope) THEN
        RETURN lease._result('lease_not_found');
    END IF;
    RETURN jsonb_build_object('code', 'lease_inspected', 'lease', lease._lease_json(l));
END
$$;

-- Page tokens are opaque and signed by the database: base64url(JSON cursor)
-- "." first 128 bits of SHA-256(key || payload). A token is valid only for
-- the list (kind and filters) that issued it.
CREATE FUNCTION lease._page_token(filter_print text, cursor text[]) RETURNS text
LANGUAGE sql STABLE
RETURN (SELECT payload || '.' || left(encode(sha256(s.page_token_key
                                                     || convert_to(payload, 'UTF8')), 'hex'), 32)
          FROM lease.secrets s,
               LATERAL (SELECT rtrim(translate(replace(encode(convert_to(
                           jsonb_build_object('f', filter_print, 'k', to_jsonb(cursor))::text,
                           'UTF8'), 'base64'), E'\n', ''), '+/', '-_'), '=') AS payload) x);

-- The cursor of a page token, or NULL when the token is not one this list
-- issued (tampered, truncated, from another filter).
CREATE FUNCTION lease._page_cursor(token text, filter_print text) RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    payload text;
    mac text;
    b64 text;
    doc jsonb;
BEGIN
    -- (regular expression bounds stop at 255: the length is checked apart)
    IF token !~ '^[A-Za-z0-9_-]{4,}\.[0-9a-f]{32}$' OR length(token) > 1000 + 33 THEN
        RETURN NULL;
    END IF;
    payload := split_part(token, '.', 1);
    mac := split_part(token, '.', 2);
    IF mac <> (SELECT left(encode(sha256(s.page_token_key || convert_to(payload, 'UTF8')), 'hex'), 32)
                 FROM lease.secrets s) THEN
        RETURN NULL;
    END IF;
    -- signed by us, so it decodes
    b64 := translate(payload, '-_', '+/');
    b64 := b64 || repeat('=', (4 - length(b64) % 4) % 4);
    doc := convert_from(decode(b64, 'base64'), 'UTF8')::jsonb;
    IF doc ->> 'f' <> filter_print OR jsonb_array_length(doc -> 'k') <> 5 THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(SELECT jsonb_array_elements_text(doc -> 'k'));
END
$$;

-- The three lists share one implementation: active, unexpired leases of one
-- tenant/program (and target, or owner), inside the caller's scope, in
-- identity order, keyset-paginated on the unique identity index.
CREATE FUNCTION lease._list(p jsonb, kind text) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, false);
    scope jsonb := p -> 'scope';
    pol lease.policy;
    tenant text;
    program text;
    ns text := '';
    target text := '';
    owner text := '';
    size bigint;
    cursor text[] := ARRAY['', '', '', '', ''];
    print text;
    leases jsonb;
    n integer;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    PERFORM lease._check_scope(scope);
    SELECT * INTO pol FROM lease.policy;
    tenant := lease.normalize_component('tenant_id', p ->> 'tenant_id');
    IF tenant IS NULL OR jsonb_typeof(p -> 'tenant_id') <> 'string' THEN
        RETURN lease._invalid('tenant_id');
    END IF;
    program := lease.normalize_component('program_id', p ->> 'program_id');
    IF program IS NULL OR jsonb_typeof(p -> 'program_id') <> 'string' THEN
        RETURN lease._invalid('program_id');
    END IF;
    IF kind = 'target' THEN
        ns := lease.normalize_component('target_namespace', p ->> 'target_namespace');
        IF ns IS NULL OR jsonb_typeof(p -> 'target_namespace') <> 'string' THEN
            RETURN lease._invalid('target_namespace');
        END IF;
        target := lease.normalize_component('target_id', p ->> 'target_id');
        IF target IS NULL OR jsonb_typeof(p -> 'target_id') <> 'string' THEN
            RETURN lease._invalid('target_id');
        END IF;
    ELSIF kind = 'owner' THEN
        IF NOT lease._id_ok(p -> 'owner_principal_id') THEN
            RETURN lease._invalid('owner_principal_id');
        END IF;
        owner := p ->> 'owner_principal_id';
    END IF;
    IF coalesce(jsonb_typeof(p -> 'page_size'), 'null') = 'null' THEN
        size := pol.default_page_size;
    ELSE
        size := lease._int(p -> 'page_size');
        IF size IS NULL OR size < 1 OR size > pol.max_page_size THEN
            RETURN lease._invalid('page_size');
        END IF;
    END IF;
    print := md5(concat_ws(E'\x1f', kind, tenant, program, ns, target, owner));
    IF coalesce(p ->> 'page_token', '') <> '' THEN
        cursor := lease._page_cursor(p ->> 'page_token', print);
        IF cursor IS NULL THEN
            RETURN lease._invalid('page_token');
        END IF;
    END IF;

    WITH page AS (
        SELECT l AS r
          FROM lease.locks l
         WHERE l.tenant_id = tenant AND l.program_id = program
           AND (kind <> 'target' OR (l.target_namespace = ns AND l.target_id = target))
           AND (kind <> 'owner' OR l.owner_principal_id = owner)
           AND (l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class)
               > (cursor[1], cursor[2], cursor[3], cursor[4], cursor[5])
           AND l.state = 'active' AND l.expires_at > now()
           AND lease._in_scope(l.tenant_id, l.program_id, l.actor_name, scope)
         ORDER BY l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
                  l.operation_class
         LIMIT size + 1)
    SELECT coalesce(jsonb_agg(lease._lease_json(r) ORDER BY (r).target_namespace,
                              (r).target_id, (r).actor_name, (r).workflow_name,
                              (r).operation_class), '[]'::jsonb),
           count(*)
      INTO leases, n
      FROM page;

    IF n <= size THEN
        RETURN jsonb_build_object('code', 'lease_listed', 'leases', leases,
                                  'next_page_token', NULL);
    END IF;
    leases := leases - (n - 1)::integer;
    RETURN jsonb_build_object('code', 'lease_listed', 'leases', leases,
        'next_page_token', lease._page_token(print, ARRAY[
            leases -> -1 #>> '{lock_identity,target_namespace}',
            leases -> -1 #>> '{lock_identity,target_id}',
            leases -> -1 #>> '{lock_identity,actor_name}',
            leases -> -1 #>> '{lock_identity,workflow_name}',
            leases -> -1 #>> '{lock_identity,operation_class}']));
END
$$;

CREATE FUNCTION lease.list_by_owner(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._list(p, 'owner');

CREATE FUNCTION lease.list_by_target(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._list(p, 'target');

CREATE FUNCTION lease.list_by_program(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._list(p, 'program');

-- Raises the high-water mark of accepted tokens (never lowers it).
CREATE FUNCTION lease._accept_token(k text, token bigint) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    INSERT INTO lease.fence_marks AS m (lock_key, high_water_token, updated_at)
    VALUES (k, token, lease._now())
    ON CONFLICT (lock_key) DO UPDATE
       SET high_water_token = EXCLUDED.high_water_token, updated_at = EXCLUDED.updated_at
     WHERE m.high_water_token < EXCLUDED.high_water_token;
END
$$;

-- The identity's row locked FOR SHARE for a fenced write. The share lock
-- orders the write against renewals and administrative invalidation in real
-- time: a revoke waits for an in-flight commit, and a commit that starts
-- after a revoke committed fails with 40001 or sees the revoke.
-- Returns NULL when the lease is not the active, unexpired, exact lease
-- (or the token is below the high-water mark); raises LS001 on corruption.
CREATE FUNCTION lease._fence(k text, i lease.identity, lease_id text, token bigint, owner text,
                             execution text) RETURNS lease.locks
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l lease.locks;
    hw bigint;
BEGIN
    SELECT * INTO l FROM lease.locks WHERE lock_key = k FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT lease._same_identity(l, i) OR l.record_version <> 1 THEN
        PERFORM lease._corrupt(k, 'stored identity tuple or record version does not match');
    END IF;
    IF l.state <> 'active' OR l.expires_at <= now() OR l.lease_id <> lease_id
       OR l.fencing_token <> token
       OR (owner IS NOT NULL AND l.owner_principal_id <> owner)
       OR (execution IS NOT NULL AND l.execution_id <> execution) THEN
        RETURN NULL;
    END IF;
    SELECT m.high_water_token INTO hw FROM lease.fence_marks m WHERE m.lock_key = k;
    IF hw IS NOT NULL AND token < hw THEN
        RETURN NULL;
    END IF;
    RETURN l;
END
$$;

-- For callers' own SERIALIZABLE transactions (docs/fencing.md): call it
-- before writing leased data; it raises unless the lease is the active,
-- unexpired lease with that id and token, so the caller's transaction
-- aborts. Records the token as accepted and returns the lease's expires_at.
CREATE FUNCTION lease.fence_check(lock_identity jsonb, lease_id text, fencing_token bigint,
                                  owner_principal_id text DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i lease.identity;
    k text;
    l lease.locks;
    hw bigint;
BEGIN
    PERFORM lease._require_serializable();
    i := lease._identity(lock_identity);
    IF i.bad_field IS NOT NULL THEN
        RAISE EXCEPTION 'invalid %', i.bad_field USING ERRCODE = '22023';
    END IF;
    IF lease_id IS NULL OR length(lease_id) > 128 OR lease_id !~ '^[A-Za-z0-9._:-]+$'
       OR coalesce(fencing_token, 0) <= 0 THEN
        RAISE EXCEPTION 'invalid lease_id or fencing_token' USING ERRCODE = '22023';
    END IF;
    IF (SELECT sealed FROM lease.namespace_state) THEN
        RAISE EXCEPTION 'lease namespace is sealed until recovery' USING ERRCODE = 'LS010';
    END IF;
    k := lease._key(i);
    l := lease._fence(k, i, lease_id, fencing_token, owner_principal_id, NULL);
    IF l.lock_key IS NULL THEN
        SELECT m.high_water_token INTO hw FROM lease.fence_marks m WHERE m.lock_key = k;
        IF hw IS NOT NULL AND fencing_token < hw THEN
            RAISE EXCEPTION 'fencing token % is below the accepted high-water mark %',
                fencing_token, hw USING ERRCODE = 'LS011';
        END IF;
        RAISE EXCEPTION 'lease % is not the active lease of this identity', lease_id
            USING ERRCODE = 'LS010';
    END IF;
    PERFORM lease._accept_token(k, fencing_token);
    RETURN l.expires_at;
END
$$;

-- Validates the writes of a commit. Returns the offending field or NULL.
CREATE FUNCTION lease._bad_writes(w jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    x jsonb;
    idx integer := -1;
    k text;
    keys text[] := ARRAY[]::text[];
    f text;
BEGIN
    IF jsonb_typeof(w) IS DISTINCT FROM 'array' OR jsonb_array_length(w) NOT BETWEEN 1 AND 32 THEN
        RETURN 'writes';
    END IF;
    FOR x IN SELECT value FROM jsonb_array_elements(w) LOOP
        idx := idx + 1;
        f := 'writes[' || idx || ']';
        IF jsonb_typeof(x) <> 'object' THEN
            RETURN f;
        END IF;
        IF x ->> 'kind' = 'document' THEN
            FOR k IN SELECT jsonb_object_keys(x) LOOP
                IF NOT k = ANY (ARRAY['kind', 'key', 'expected_revision', 'body']) THEN
                    RETURN f || '.' || k;
                END IF;
            END LOOP;
            IF jsonb_typeof(x -> 'key') IS DISTINCT FROM 'string'
               OR x ->> 'key' !~ '^[A-Za-z0-9._:/-]+$' OR length(x ->> 'key') > 256
               OR x ->> 'key' = ANY (keys) THEN
                RETURN f || '.key';
            END IF;
            keys := keys || (x ->> 'key');
            IF lease._int(x -> 'expected_revision') IS NULL
               OR lease._int(x -> 'expected_revision') < 0 THEN
                RETURN f || '.expected_revision';
            END IF;
            IF jsonb_typeof(x -> 'body') IS DISTINCT FROM 'object' THEN
                RETURN f || '.body';
            END IF;
        ELSIF x ->> 'kind' = 'publication' THEN
            FOR k IN SELECT jsonb_object_keys(x) LOOP
                IF NOT k = ANY (ARRAY['kind', 'topic', 'payload']) THEN
                    RETURN f || '.' || k;
                END IF;
            END LOOP;
            IF jsonb_typeof(x -> 'topic') IS DISTINCT FROM 'string'
               OR x ->> 'topic' !~ '^[A-Za-z0-9._:/-]+$' OR length(x ->> 'topic') > 256 THEN
                RETURN f || '.topic';
            END IF;
            IF jsonb_typeof(x -> 'payload') IS DISTINCT FROM 'object' THEN
                RETURN f || '.payload';
            END IF;
        ELSE
            RETURN f || '.kind';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- The commit coordinator behind POST /v1/commits: validates the exact lease
-- (identity, id, owner, token, execution) at this transaction's
-- linearization point, checks every document's expected revision, then
-- writes documents and outbox rows with the token that authorised them and
-- records the token as accepted. All or nothing.
CREATE FUNCTION lease.fenced_commit(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
    IF (SELECT sealed FROM lease.namespace_state) THEN
        RETURN jsonb_build_object('code', 'lease_backend_unavailable', 'reason', 'sealed');
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
    PERFORM lease._remember(k, 'commit', p, result, l.lease_id);
    PERFORM lease._audit(p, 'target_lease_commit', 'commit_accepted',
        jsonb_build_object('lock_identity', lease._identity_json(l.tenant_id, l.program_id,
                               l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
                               l.operation_class),
                           'lease_id', l.lease_id, 'fencing_token', token,
                           'service_instance_id', l.service_instance_id,
                           'execution_id', l.execution_id, 'job_id', l.job_id,
                           'trace_id', p ->> 'trace_id', 'previous_state', 'active',
                           'resulting_state', 'active'));
    RETURN result || jsonb_build_object('replayed', false);
END
$$;
