CREATE OR REPLACE FUNCTION lease._renew_or_replay(p jsonb, brief boolean, s lease._settings)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    cn text;
    replay jsonb;
BEGIN
    RETURN lease._renew(p, brief, s);
EXCEPTION WHEN unique_violation THEN
    -- this request id committed before and the lease still matched (see
    -- lease.acquire): the stored answer, nothing of this attempt
    GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
    replay := lease._replay_of_typed_conflict(
        cn, 'renew', p #>> '{lock_identity,tenant_id}', p #>> '{lock_identity,program_id}',
        p #>> '{lock_identity,target_namespace}', p #>> '{lock_identity,target_id}',
        p #>> '{lock_identity,actor_name}', p #>> '{lock_identity,workflow_name}',
        p #>> '{lock_identity,operation_class}', p #>> '{principal,principal_id}',
        p ->> 'request_id', p ->> 'request_digest');
    IF replay IS NULL THEN
        RAISE;
    END IF;
    RETURN replay;
END
$function$;

COMMENT ON FUNCTION lease._renew_or_replay(jsonb,boolean,lease._settings) IS
    'One renewal (lease._renew) in a subtransaction of its own, so that a repeated request id whose lease still matched is undone and answered from its stored result. What lease.renew calls, and what lease.renew_many falls back to item by item when its whole-batch subtransaction met such a request.';

REVOKE ALL ON FUNCTION lease._renew_or_replay(jsonb,boolean,lease._settings) FROM PUBLIC;
