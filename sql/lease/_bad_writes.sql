CREATE OR REPLACE FUNCTION lease._bad_writes(w jsonb)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
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
               OR x ->> 'topic' !~ '^[A-Za-z0-9._:/-]+$' OR length(x ->> 'topic') > 255 THEN
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
$function$;

COMMENT ON FUNCTION lease._bad_writes(jsonb) IS
    'The offending field of a fenced commit''s writes, or NULL. A topic is at most 255 characters (ASCII: 255 bytes), what an AMQP short string carries, so a topic the relay could never publish is refused at commit time (docs/relay.md).';

REVOKE ALL ON FUNCTION lease._bad_writes(jsonb) FROM PUBLIC;
