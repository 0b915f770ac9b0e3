CREATE OR REPLACE FUNCTION lease._result(code text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('code', code);

COMMENT ON FUNCTION lease._result(text) IS
    'Typed results: the JSON answer of a decision, {"code": ...} with the fields a code carries (retryable, detail).';

REVOKE ALL ON FUNCTION lease._result(text) FROM PUBLIC;
