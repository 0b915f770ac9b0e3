CREATE OR REPLACE FUNCTION lease._relay_text(v text, what text, max_len integer)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
    IF v IS NULL OR length(v) NOT BETWEEN 1 AND max_len THEN
        RAISE EXCEPTION '% must be 1..% characters', what, max_len USING ERRCODE = '22023';
    END IF;
    RETURN v;
END
$function$;

COMMENT ON FUNCTION lease._relay_text(text,text,integer) IS
    'The relay''s text arguments: 1..max_len characters, else 22023 naming the argument; what the relay stores is bounded.';

REVOKE ALL ON FUNCTION lease._relay_text(text,text,integer) FROM PUBLIC;
