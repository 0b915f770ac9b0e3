CREATE OR REPLACE FUNCTION lease._bad_lease_ref(p jsonb, i lease.identity) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN i.bad_field IS NOT NULL THEN i.bad_field
    WHEN NOT lease._id_ok(p -> 'lease_id') THEN 'lease_id'
    WHEN coalesce(lease._int(p -> 'fencing_token'), 0) <= 0 THEN 'fencing_token'
    END;

COMMENT ON FUNCTION lease._bad_lease_ref(jsonb,lease.identity) IS
    'Checks what renew, release, force_release and revoke share: the identity (normalised once by the caller), lease_id and fencing_token. Returns the offending field or NULL.';

REVOKE ALL ON FUNCTION lease._bad_lease_ref(jsonb,lease.identity) FROM PUBLIC;
