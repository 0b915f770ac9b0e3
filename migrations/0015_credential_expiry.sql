-- 0015: a credential's expiry is a timestamp compared with backend time.
--
-- leased used to read expires_at as milliseconds since the epoch with 0
-- meaning "no expiry", so an expiry of 1970-01-01T00:00:00Z never expired,
-- -infinity (rendered as an empty string) did not either, and a year far
-- beyond 9999 made every lookup of the row fail. Now:
--
-- - credential_lookup says whether the row is revoked and how many
--   milliseconds of validity are left at backend time (expires_in_ms: NULL
--   without expiry, 0 for every past instant, -infinity included); leased
--   counts down from the moment it asked, on its own monotonic clock, and
--   never reads the timestamp itself;
-- - an expiry from 10000-01-01T00:00:00Z on (+infinity included) cannot be
--   written: it is refused with 22023 by credential_create and by any other
--   INSERT or UPDATE of the row (a trigger, not a CHECK: rows written before
--   this migration stay readable; their lookup caps the remaining time).

-- The first instant that is not a valid expiry: leased's times are
-- RFC 3339 with a four-digit year.
CREATE FUNCTION lease._credential_expiry_limit() RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN timestamptz '10000-01-01 00:00:00+00';

CREATE FUNCTION lease._credential_expiry_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.expires_at >= lease._credential_expiry_limit() THEN
        RAISE EXCEPTION 'expires_at out of range: it must be before 10000-01-01T00:00:00Z'
            USING ERRCODE = '22023';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER credentials_expiry_range
    BEFORE INSERT OR UPDATE OF expires_at ON lease.credentials
    FOR EACH ROW EXECUTE FUNCTION lease._credential_expiry_check();

-- Milliseconds of validity left at backend time: NULL without expiry, 0
-- once expired (every past instant, -infinity included), at most 2^53-1.
CREATE FUNCTION lease._credential_expires_in_ms(expires_at timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN expires_at IS NULL THEN NULL
            WHEN expires_at <= now() THEN 0
            WHEN NOT isfinite(expires_at) THEN 9007199254740991
            ELSE least(ceil(extract(epoch FROM expires_at - now()) * 1000),
                       9007199254740991)::bigint END;

-- As 0006, plus "revoked" and "expires_in_ms": the service decides from
-- these, not from the rendered timestamps.
CREATE OR REPLACE FUNCTION lease.credential_lookup(credential_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c lease.credentials;
BEGIN
    PERFORM lease._require_serializable();
    SELECT * INTO c FROM lease.credentials x WHERE x.credential_id = credential_lookup.credential_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN lease._credential_json(c, true)
        || jsonb_build_object('revoked', c.revoked_at IS NOT NULL,
                              'expires_in_ms', lease._credential_expires_in_ms(c.expires_at));
END
$$;

REVOKE EXECUTE ON FUNCTION lease._credential_expiry_limit(), lease._credential_expiry_check(),
    lease._credential_expires_in_ms(timestamptz) FROM PUBLIC;
