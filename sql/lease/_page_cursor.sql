CREATE OR REPLACE FUNCTION lease._page_cursor(token text, filter_print text)
 RETURNS text[]
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;

COMMENT ON FUNCTION lease._page_cursor(text,text) IS
    'The cursor of a page token, or NULL when the token is not one this list issued (tampered, truncated, from another filter).';

REVOKE ALL ON FUNCTION lease._page_cursor(text,text) FROM PUBLIC;
