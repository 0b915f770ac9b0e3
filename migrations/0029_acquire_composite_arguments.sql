-- 0029: the acquisition's decider takes two composites instead of 26
-- positional arguments (issue 36, "so a new optional field is not a new
-- signature").
--
-- lease.acquire_brief_typed(lock_identity lease.identity,
--                           request lease.acquire_request,
--                           brief boolean DEFAULT true)
--
-- lease.identity (0003) carries the seven components (its bad_field is not
-- read); lease.acquire_request, below, the rest of the request in the order
-- the positional arguments had. A new optional field of an acquisition is
-- `ALTER TYPE lease.acquire_request ADD ATTRIBUTE ...` in a numbered file
-- (appended last: leased writes the composite's text literal in attribute
-- order) and its use in sql/lease/acquire_brief_typed.sql; the function's
-- signature, its grants and every psql caller of lease.acquire(jsonb) stay
-- as they are.
--
-- The old signature is dropped here (IF EXISTS: a new database, which
-- starts from the schema-27 baseline, never had it); sql/ then defines the
-- new one in this transaction (docs/schema.md, "How the schema changes"),
-- and a database at version 29 has it before a build that calls it reports
-- ready.
CREATE TYPE lease.acquire_request AS (
    service_instance_id text,
    execution_id text,
    job_id text,
    trace_id text,
    ttl_ms bigint,
    maximum_lifetime_ms bigint,
    metadata jsonb,
    principal_id text,
    client_id text,
    credential_id text,
    principal_class text,
    request_id text,
    request_digest text,
    deadline_at timestamptz,
    correlation_id text,
    deadline_class text,
    latency_ms integer,
    session_id text
);

COMMENT ON TYPE lease.acquire_request IS
    'An acquisition''s request apart from its identity: the second argument of lease.acquire_brief_typed (migration 0029). NULL: absent (no trace id, the policy''s TTL or lifetime, no metadata, no session); the rules of each field are the decider''s (docs/sql-api.md, "Typed calls"). New optional fields are appended.';

DROP FUNCTION IF EXISTS lease.acquire_brief_typed(text, text, text, text, text, text, text, text,
    text, text, text, bigint, bigint, jsonb, text, text, text, text, text, text, timestamptz, text,
    text, integer, boolean, text);
