CREATE OR REPLACE FUNCTION lease._unmatched(k text, op text, p jsonb, c text, otherwise jsonb)
 RETURNS jsonb
 LANGUAGE sql
 VOLATILE
RETURN lease._unmatched_t(k, op, p #>> '{principal,principal_id}', p ->> 'request_id',
                          p ->> 'request_digest', c, otherwise);

COMMENT ON FUNCTION lease._unmatched(text,text,jsonb,text,jsonb) IS
    'lease._unmatched_t for a jsonb request: the answer when a state-changing write matched nothing (the stored answer of a repeated request, LS001 when the stored tuple differs, else otherwise). A SQL function, inlined where it is called.';

REVOKE ALL ON FUNCTION lease._unmatched(text,text,jsonb,text,jsonb) FROM PUBLIC;
