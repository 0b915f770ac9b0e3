CREATE OR REPLACE FUNCTION lease._replay_of_conflict(p jsonb, op text, constraint_name text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
RETURN CASE WHEN constraint_name = 'idempotency_pkey'
            THEN lease._replay(lease._key_of(lease._canonical(p -> 'lock_identity')), op, p) END;

COMMENT ON FUNCTION lease._replay_of_conflict(jsonb,text,text) IS
    'What a renewal or an ending answers when its evidence failed on a unique constraint: on idempotency''s primary key, this request id committed before while the lease still matched, so the stored answer (lease._replay), nothing of this attempt; NULL for any other constraint (the caller raises the error again). Called only from the exception blocks of lease._renew_or_replay and lease._end_or_replay.';

REVOKE ALL ON FUNCTION lease._replay_of_conflict(jsonb,text,text) FROM PUBLIC;
