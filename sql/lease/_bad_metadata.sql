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
    IF m IS NULL OR jsonb_typeof(m) = 'null' OR m = '{}'::jsonb THEN
        RETURN NULL;  -- absent, null or empty: no metadata
    END IF;
    IF jsonb_typeof(m) <> 'object' THEN
        RETURN 'metadata';
    END IF;
    FOR e IN SELECT key, value FROM jsonb_each(m) LOOP
        n := n + 1;
        IF n > 16 OR length(e.key) > 64 OR e.key !~ '^[a-z0-9_]+$' THEN
            RETURN 'metadata.' || left(e.key, 64);
        END IF;
        IF NOT (jsonb_typeof(e.value) = 'boolean'
                OR jsonb_typeof(e.value) = 'number'
                   AND abs((e.value #>> '{}')::numeric) <= 9007199254740991
                OR jsonb_typeof(e.value) = 'string' AND octet_length(e.value #>> '{}') <= 256) THEN
            RETURN 'metadata.' || e.key;
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
    'Metadata rules (docs/contract.md): the offending field or NULL. Numbers must lie within +-(2^53 - 1) so every accepted value round-trips exactly through JSON clients.';

REVOKE ALL ON FUNCTION lease._bad_metadata(jsonb) FROM PUBLIC;
