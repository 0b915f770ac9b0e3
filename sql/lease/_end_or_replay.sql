CREATE OR REPLACE FUNCTION lease._end_or_replay(p jsonb, op text, terminal_state text,
                                               success_code text, brief boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    cn text;
    replay jsonb;
BEGIN
    RETURN lease._end(p, op, terminal_state, success_code, brief);
EXCEPTION WHEN unique_violation THEN
    -- this request id committed before and the lease still matched (see
    -- lease.acquire): the stored answer, nothing of this attempt
    GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
    replay := lease._replay_of_typed_conflict(
        cn, op, p #>> '{lock_identity,tenant_id}', p #>> '{lock_identity,program_id}',
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

COMMENT ON FUNCTION lease._end_or_replay(jsonb,text,text,text,boolean) IS
    'One ending (lease._end: release, forced release or revocation) in a subtransaction of its own, so that a repeated request id whose lease still matched is undone and answered from its stored result. What lease.release, force_release and revoke call, and what lease.release_many falls back to item by item when its whole-batch subtransaction met such a request.';

REVOKE ALL ON FUNCTION lease._end_or_replay(jsonb,text,text,text,boolean) FROM PUBLIC;
