CREATE OR REPLACE FUNCTION lease._component(p jsonb, field text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN lease.normalize_component(field,
    CASE WHEN jsonb_typeof(p -> field) = 'string' THEN p ->> field
         WHEN field = 'operation_class' AND coalesce(jsonb_typeof(p -> field), 'null') = 'null'
             THEN NULL
         ELSE chr(1) END);

COMMENT ON FUNCTION lease._component(jsonb,text) IS
    'A component of a lock_identity object: its string value, or NULL when it is missing or not a string (operation_class: absent or null is default).';

REVOKE ALL ON FUNCTION lease._component(jsonb,text) FROM PUBLIC;
