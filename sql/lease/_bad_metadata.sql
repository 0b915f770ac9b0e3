CREATE OR REPLACE FUNCTION lease._bad_metadata(m jsonb)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
DECLARE
    e record;
    n integer := 0;
    size integer := 2;
BEGIN
    IF m IS NULL OR m = '{}'::jsonb THEN
        RETURN NULL;  -- absent (SQL NULL) or empty: no metadata
    END IF;
    -- a JSON null is not an object (docs/api.md: only operation_class may be
    -- null), and the key count is the object's fault, not its 17th key's
    IF jsonb_typeof(m) <> 'object' THEN
        RETURN 'metadata';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(m)) > 16 THEN
        RETURN 'metadata';
    END IF;
    FOR e IN SELECT key, value FROM jsonb_each(m) LOOP
        n := n + 1;
        IF length(e.key) > 64 OR e.key !~ '^[a-z0-9_]+$' THEN
            RETURN left('metadata.' || e.key, 64);
        END IF;
        IF NOT (CASE jsonb_typeof(e.value)
            WHEN 'boolean' THEN true
            WHEN 'string' THEN octet_length(e.value #>> '{}') <= 256
            WHEN 'number' THEN CASE
                -- magnitude at most 2^53 - 1. A number written with a
                -- fraction is a real, read as the double C reads and stores
                -- (docs/api.md): 9007199254740991.4 is 9007199254740991,
                -- 9007199254740991.5 rounds to 2^53.
                WHEN scale((e.value #>> '{}')::numeric) = 0
                    THEN abs((e.value #>> '{}')::numeric) <= 9007199254740991
                WHEN abs((e.value #>> '{}')::numeric) >= 9007199254740992 THEN false
                ELSE abs((e.value #>> '{}')::float8) <= 9007199254740991 END
            ELSE false END) THEN
            RETURN left('metadata.' || e.key, 64);  -- field names are cut at 64, as in C
        END IF;
        size := size + octet_length(to_jsonb(e.key)::text) + 1 + octet_length(e.value::text)
                + CASE WHEN n > 1 THEN 1 ELSE 0 END;
    END LOOP;
    IF size > 2048 THEN
        RETURN 'metadata';
    END IF;
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION lease._bad_metadata(jsonb) IS
    'Metadata rules (docs/api.md): the offending field or NULL. A flat object of at most 16 keys [a-z0-9_]{1,64}, values boolean, string of at most 256 bytes or number within +-(2^53 - 1), a real judged as the double C reads (so every accepted value round-trips exactly through JSON clients), at most 2048 bytes compact; a JSON null or too many keys name "metadata", a bad key or value "metadata.<key>" cut at 64 characters. tests/vectors/metadata.json holds the C codec and this function to the same answers.';

REVOKE ALL ON FUNCTION lease._bad_metadata(jsonb) FROM PUBLIC;
