CREATE OR REPLACE FUNCTION lease.credential_create(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    c lease.credentials;
    actors text[];
    caps text[];
    a text;
    v text;
BEGIN
    PERFORM lease._require_serializable();
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'credential must be an object' USING ERRCODE = '22023';
    END IF;
    IF coalesce(p ->> 'credential_id', '') !~ '^key_[a-z2-7]{26}$' THEN
        RAISE EXCEPTION 'invalid credential_id' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._id_ok(p -> 'principal_id') OR NOT lease._id_ok(p -> 'client_id') THEN
        RAISE EXCEPTION 'invalid principal_id or client_id' USING ERRCODE = '22023';
    END IF;
    IF lease.normalize_component('tenant_id', p ->> 'tenant_id') IS NULL THEN
        RAISE EXCEPTION 'invalid tenant_id' USING ERRCODE = '22023';
    END IF;
    IF p ->> 'program_id' IS DISTINCT FROM '*'
       AND lease.normalize_component('program_id', p ->> 'program_id') IS NULL THEN
        RAISE EXCEPTION 'invalid program_id' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p -> 'actor_names') IS DISTINCT FROM 'array'
       OR jsonb_array_length(p -> 'actor_names') NOT BETWEEN 1 AND 32 THEN
        RAISE EXCEPTION 'actor_names must list 1 to 32 names' USING ERRCODE = '22023';
    END IF;
    actors := ARRAY[]::text[];
    FOR a IN SELECT jsonb_array_elements_text(p -> 'actor_names') LOOP
        v := CASE WHEN a = '*' THEN '*' ELSE lease.normalize_component('actor_name', a) END;
        IF v IS NULL THEN
            RAISE EXCEPTION 'invalid actor name %', a USING ERRCODE = '22023';
        END IF;
        actors := actors || v;
    END LOOP;
    IF '*' = ANY (actors) AND cardinality(actors) > 1 THEN
        RAISE EXCEPTION 'actor "*" must stand alone' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p -> 'capabilities') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'capabilities must be an array' USING ERRCODE = '22023';
    END IF;
    caps := ARRAY(SELECT DISTINCT jsonb_array_elements_text(p -> 'capabilities') ORDER BY 1);
    IF NOT caps <@ ARRAY['targets:lease', 'targets:read', 'targets:force-release', 'targets:revoke',
                         'audit:read'] THEN
        RAISE EXCEPTION 'unknown capability' USING ERRCODE = '22023';
    END IF;
    IF coalesce(jsonb_typeof(p -> 'admin'), 'boolean') <> 'boolean' THEN
        RAISE EXCEPTION 'admin must be true or false' USING ERRCODE = '22023';
    END IF;
    IF NOT coalesce((p -> 'admin')::boolean, false)
       AND (p ->> 'program_id' = '*'
            OR caps && ARRAY['targets:force-release', 'targets:revoke']) THEN
        RAISE EXCEPTION 'program "*", targets:force-release and targets:revoke need an administrator credential'
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(p ->> 'secret_digest', '') !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'invalid secret_digest' USING ERRCODE = '22023';
    END IF;
    IF p ->> 'description' ~ '[[:cntrl:]]' OR char_length(p ->> 'description') > 256 THEN
        RAISE EXCEPTION 'invalid description' USING ERRCODE = '22023';
    END IF;
    INSERT INTO lease.credentials (credential_id, principal_id, client_id, tenant_id,
                                   program_id, actor_names, capabilities, admin, secret_digest,
                                   description, expires_at)
    VALUES (p ->> 'credential_id', p ->> 'principal_id', p ->> 'client_id',
            lease.normalize_component('tenant_id', p ->> 'tenant_id'),
            CASE WHEN p ->> 'program_id' = '*' THEN '*'
                 ELSE lease.normalize_component('program_id', p ->> 'program_id') END,
            actors, caps, coalesce((p -> 'admin')::boolean, false),
            decode(p ->> 'secret_digest', 'hex'), p ->> 'description',
            (p ->> 'expires_at')::timestamptz)
    RETURNING * INTO c;
    PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                         'credential_create', 'credential_created',
                         jsonb_build_object('lock_identity', jsonb_build_object(
                                                'tenant_id', c.tenant_id,
                                                'program_id', c.program_id),
                                            'reason', 'credential ' || c.credential_id
                                                      || ' for ' || c.principal_id,
                                            'priority', 'high'));
    RETURN lease._credential_json(c, false);
END
$function$;

COMMENT ON FUNCTION lease.credential_create(jsonb) IS
    'Creates a credential (docs/credentials.md): only a SHA-256 digest of the secret is stored, never the secret; audited in the same transaction.';

REVOKE ALL ON FUNCTION lease.credential_create(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.credential_create(jsonb) TO lease_admin;
