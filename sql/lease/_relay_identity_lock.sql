CREATE OR REPLACE FUNCTION lease._relay_identity_lock(k text) RETURNS boolean
LANGUAGE sql VOLATILE
RETURN pg_try_advisory_xact_lock(1819042146, hashtext(k));

COMMENT ON FUNCTION lease._relay_identity_lock(text) IS
    'The relay''s claim on one identity, held until the transaction ends. The two-key form keeps these locks apart from the project''s other advisory locks (single bigint keys); a hash collision only makes two identities share a relay, never splits one.';

REVOKE ALL ON FUNCTION lease._relay_identity_lock(text) FROM PUBLIC;
