CREATE OR REPLACE FUNCTION lease._invalid(field text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN jsonb_build_object('code', 'invalid_lease_request', 'field', field);

COMMENT ON FUNCTION lease._invalid(text) IS
    'invalid_lease_request naming a field, with a human detail (for bounds) or without.';

REVOKE ALL ON FUNCTION lease._invalid(text) FROM PUBLIC;


CREATE OR REPLACE FUNCTION lease._invalid(field text, detail text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN CASE WHEN (detail IS NULL) THEN lease._invalid(field) ELSE jsonb_build_object('code', 'invalid_lease_request', 'field', field, 'detail', detail) END;

COMMENT ON FUNCTION lease._invalid(text,text) IS
    'invalid_lease_request naming a field, with a human detail (for bounds) or without.';

REVOKE ALL ON FUNCTION lease._invalid(text,text) FROM PUBLIC;
