CREATE OR REPLACE FUNCTION lease._unmatched_t(k text, op text, principal_id text, request_id text,
                                              request_digest text, c text, otherwise jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    replay jsonb;
BEGIN
    replay := lease._replay_t(k, op, principal_id, request_id, request_digest);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;
    PERFORM lease._row(k, lease._identity_of(c));
    RETURN otherwise;
END
$function$;

COMMENT ON FUNCTION lease._unmatched_t(text,text,text,text,text,text,jsonb) IS
    'The answer when a state-changing write matched nothing: the stored answer of a repeated request (looked up here, after the write matched nothing, never before it: the same for every caller), LS001 when the stored tuple differs, else otherwise. Typed: lease._unmatched calls it for a jsonb request.';

REVOKE ALL ON FUNCTION lease._unmatched_t(text,text,text,text,text,text,jsonb) FROM PUBLIC;
