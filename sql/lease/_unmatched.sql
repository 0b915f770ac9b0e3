CREATE OR REPLACE FUNCTION lease._unmatched(k text, op text, p jsonb, c text, otherwise jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    replay jsonb;
BEGIN
    replay := lease._replay(k, op, p);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;
    PERFORM lease._row(k, lease._identity_of(c));
    RETURN otherwise;
END
$function$;

COMMENT ON FUNCTION lease._unmatched(text,text,jsonb,text,jsonb) IS
    'The answer when a state-changing write matched nothing: the stored answer of a repeated request (looked up here, after the write matched nothing, never before it: the same for every caller), LS001 when the stored tuple differs, else otherwise.';

REVOKE ALL ON FUNCTION lease._unmatched(text,text,jsonb,text,jsonb) FROM PUBLIC;
