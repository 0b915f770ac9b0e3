-- 0001: the lease schema and the three roles.
--
-- Roles are cluster-wide group roles (NOLOGIN); operators grant them to their
-- login roles. Creating them needs CREATEROLE (or superuser). Managed
-- Postgres usually grants CREATEROLE to the administrator account; where it
-- does not, create the roles out of band first (see docs/schema.md) and this
-- migration uses them as they are.

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['lease_service', 'lease_operator', 'lease_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'cannot create role %: the migrating user lacks CREATEROLE', r
                    USING HINT = 'Ask your provider''s administrator to run: CREATE ROLE '
                                 || r || ' NOLOGIN; then run leasectl migrate again.';
            END;
        END IF;
    END LOOP;
END
$$;

-- The service decides every lease at SERIALIZABLE in one round trip, so its
-- role defaults to it (this applies to sessions that log in as lease_service;
-- login roles that are members need the same setting, docs/schema.md).
DO $$
BEGIN
    ALTER ROLE lease_service SET default_transaction_isolation = 'serializable';
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'could not set default_transaction_isolation on lease_service'
        USING HINT = 'Run: ALTER ROLE <leased login role> SET default_transaction_isolation = ''serializable''';
END
$$;

CREATE SCHEMA IF NOT EXISTS lease;
REVOKE ALL ON SCHEMA lease FROM PUBLIC;
GRANT USAGE ON SCHEMA lease TO lease_service, lease_operator, lease_admin;

-- Administrators see what operators see.
GRANT lease_operator TO lease_admin;

-- Nothing in the schema is executable or readable by PUBLIC, now or later.
ALTER DEFAULT PRIVILEGES IN SCHEMA lease REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA lease REVOKE ALL ON TABLES FROM PUBLIC;
