CREATE OR REPLACE FUNCTION lease._sealed_result(why text) RETURNS jsonb
LANGUAGE sql STABLE
RETURN jsonb_build_object('code', 'lease_backend_unavailable', 'reason', 'sealed',
                          'detail', why);

COMMENT ON FUNCTION lease._sealed_result(text) IS
    'The refusal a deciding operation returns while the namespace is sealed.';

REVOKE ALL ON FUNCTION lease._sealed_result(text) FROM PUBLIC;
