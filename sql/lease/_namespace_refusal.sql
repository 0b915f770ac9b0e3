CREATE OR REPLACE FUNCTION lease._namespace_refusal(ns lease.namespace_state, pol lease.policy)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
DECLARE
    why text;
BEGIN
    IF ns.sealed THEN
        RETURN ns.sealed_reason;
    END IF;
    why := lease._namespace_mismatch(ns, pol.seal_on_timeline_change);
    IF why IS NULL THEN
        IF ns.timeline_id IS NULL THEN
            PERFORM lease._record_namespace();  -- first deciding call of a new namespace
        END IF;
        RETURN NULL;
    END IF;
    PERFORM lease._seal(why);
    RETURN why;
END
$function$;

COMMENT ON FUNCTION lease._namespace_refusal(lease.namespace_state,lease.policy) IS
    'The guard every deciding operation runs before it decides: NULL when this database may decide, else the reason it may not (the namespace is then sealed, in this transaction, which commits with the caller''s refusal). Callers read ns and pol in their own first statement and call this only when ns.sealed or lease._namespace_mismatch says something; the common case costs one inlined expression.';

REVOKE ALL ON FUNCTION lease._namespace_refusal(lease.namespace_state,lease.policy) FROM PUBLIC;
