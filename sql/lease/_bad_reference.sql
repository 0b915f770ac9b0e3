CREATE OR REPLACE FUNCTION lease._bad_reference(p jsonb, c text, as_owner boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN c IS NULL THEN (lease._identity(p -> 'lock_identity')).bad_field
    WHEN NOT lease._id_ok(p -> 'lease_id') THEN 'lease_id'
    WHEN coalesce(lease._int(p -> 'fencing_token'), 0) <= 0 THEN 'fencing_token'
    WHEN as_owner AND NOT lease._id_ok(p -> 'service_instance_id') THEN 'service_instance_id'
    END;

COMMENT ON FUNCTION lease._bad_reference(jsonb,text,boolean) IS
    'The references renew, release, force_release and revoke share: the offending field, or NULL.';

REVOKE ALL ON FUNCTION lease._bad_reference(jsonb,text,boolean) FROM PUBLIC;
