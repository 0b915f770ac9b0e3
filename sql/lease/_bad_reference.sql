CREATE OR REPLACE FUNCTION lease._bad_reference(p jsonb, c text, as_owner boolean)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN (c IS NULL) THEN (lease._identity((p -> 'lock_identity'::text))).bad_field WHEN (NOT lease._id_ok((p -> 'lease_id'::text))) THEN 'lease_id'::text WHEN (COALESCE(lease._int((p -> 'fencing_token'::text)), (0)::bigint) <= 0) THEN 'fencing_token'::text WHEN (as_owner AND (NOT lease._id_ok((p -> 'service_instance_id'::text)))) THEN 'service_instance_id'::text ELSE NULL::text END;

COMMENT ON FUNCTION lease._bad_reference(jsonb,text,boolean) IS
    'The references renew, release, force_release and revoke share: the offending field, or NULL.';

REVOKE ALL ON FUNCTION lease._bad_reference(jsonb,text,boolean) FROM PUBLIC;
