CREATE OR REPLACE FUNCTION lease._guard()
 RETURNS text
 LANGUAGE plpgsql
AS $function$
DECLARE
    ns lease.namespace_state;
    pol lease.policy;
BEGIN
    SELECT * INTO ns FROM lease.namespace_state;
    SELECT * INTO pol FROM lease.policy;
    RETURN lease._namespace_refusal(ns, pol);
END
$function$;

COMMENT ON FUNCTION lease._guard() IS
    'The guard as deciding operations call it: NULL when this database may decide (recording the namespace if it was not yet), else why not (the namespace is then sealed, in the caller''s transaction).';

REVOKE ALL ON FUNCTION lease._guard() FROM PUBLIC;
