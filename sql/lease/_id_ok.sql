CREATE OR REPLACE FUNCTION lease._id_ok(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- v's JSON text: quoted only when v is a string, and no allowed character
-- needs an escape, so a valid string is its value between quotes (128
-- characters and 2 quotes). v once fewer than with jsonb_typeof and #>>:
-- callers pass a member look-up (p -> 'x'), which inlining repeats at each use.
RETURN coalesce(length(v::text) <= 130 AND v::text ~ '^"[A-Za-z0-9._:-]+"$', false);

COMMENT ON FUNCTION lease._id_ok(jsonb) IS
    'Identifier fields: 1..128 of [A-Za-z0-9._:-].';

REVOKE ALL ON FUNCTION lease._id_ok(jsonb) FROM PUBLIC;
