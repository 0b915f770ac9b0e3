CREATE OR REPLACE FUNCTION lease._answer_of(a jsonb) RETURNS lease.answer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ROW(
    a ->> 'code', (a ->> 'replayed')::boolean, a ->> 'current_state',
    (a ->> 'retry_after_ms')::bigint, a ->> 'field', a ->> 'reason', a ->> 'detail',
    a #>> '{lease,lease_id}', (a #>> '{lease,fencing_token}')::bigint, a #>> '{lease,state}',
    a #>> '{lease,acquired_at}', a #>> '{lease,renewed_at}', a #>> '{lease,expires_at}',
    a #>> '{lease,ended_at}', (a #>> '{lease,ttl_ms}')::bigint,
    (a #>> '{lease,maximum_lifetime_ms}')::bigint, a #>> '{lease,owner_principal_id}',
    a #>> '{lease,owner_client_id}', a #>> '{lease,owner_credential_id}',
    a #>> '{lease,service_instance_id}', a #>> '{lease,execution_id}', a #>> '{lease,job_id}',
    a #>> '{lease,trace_id}', a #>> '{lease,request_id}', a #>> '{lease,end_reason}',
    a #>> '{lease,incident_id}', a #> '{lease,metadata}')::lease.answer;

COMMENT ON FUNCTION lease._answer_of(jsonb) IS
    'A jsonb answer of a lease operation as a lease.answer row: what the typed calls return, so that the service reads columns instead of parsing a document. Member by member, nothing decided here: an absent member and a JSON null are both NULL (metadata keeps a JSON null as jsonb ''null''); a lease record''s lock_identity is left out (the caller named it).';

REVOKE ALL ON FUNCTION lease._answer_of(jsonb) FROM PUBLIC;
