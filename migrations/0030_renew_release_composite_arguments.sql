-- 0030: the renewal's and the release's deciders, and their batches, take
-- composites instead of positional arguments, as the acquisition's does
-- since 0029 (issue 36, "so a new optional field is not a new signature").
--
-- lease.renew_brief_typed(lock_identity lease.identity,
--                         request lease.renew_request,
--                         brief boolean DEFAULT true)
-- lease.release_brief_typed(lock_identity lease.identity,
--                           request lease.release_request)
-- lease.renew_many_brief_typed(lock_identities lease.identity[],
--                              requests lease.renew_request[])
-- lease.release_many_brief_typed(lock_identities lease.identity[],
--                                requests lease.release_request[])
--
-- lease.identity (0003) carries the seven components (its bad_field is not
-- read); lease.renew_request and lease.release_request, below, the rest of
-- the request in the order the positional arguments had (a release's is a
-- renewal's without ttl_ms). A batch takes one array of each, an element
-- per item. The rules the single calls and their batches share,
-- lease._renew_t and lease._end_t, take the same two composites (_end_t
-- also for force_release and revoke through lease._end: their request has
-- no service_instance_id). A new optional field of a renewal or a release
-- is `ALTER TYPE lease.renew_request ADD ATTRIBUTE ...` (or
-- release_request's) in a numbered file, appended last (leased writes the
-- composite's text literal in attribute order), and its use as
-- request.<name> in sql/lease/_renew_t.sql or _end_t.sql; the signatures,
-- their grants and every psql caller of lease.renew(jsonb),
-- lease.release(jsonb), renew_many and release_many stay as they are.
--
-- The old signatures are dropped here (IF EXISTS, as 0029 does); sql/ then
-- defines the new ones in this transaction (docs/schema.md, "How the schema
-- changes"), and a database at version 30 has them before a build that
-- calls them reports ready.
CREATE TYPE lease.renew_request AS (
    lease_id text,
    fencing_token bigint,
    ttl_ms bigint,
    service_instance_id text,
    principal_id text,
    principal_class text,
    credential_id text,
    request_id text,
    request_digest text,
    deadline_at timestamptz,
    correlation_id text,
    trace_id text,
    deadline_class text,
    latency_ms integer
);

COMMENT ON TYPE lease.renew_request IS
    'A renewal''s request apart from its identity: the second argument of lease.renew_brief_typed, an element of lease.renew_many_brief_typed''s second (migration 0030). NULL: absent (ttl_ms NULL keeps the lease''s TTL); the rules of each field are lease._renew_t''s (docs/sql-api.md, "Typed calls"). New optional fields are appended.';

CREATE TYPE lease.release_request AS (
    lease_id text,
    fencing_token bigint,
    service_instance_id text,
    principal_id text,
    principal_class text,
    credential_id text,
    request_id text,
    request_digest text,
    deadline_at timestamptz,
    correlation_id text,
    trace_id text,
    deadline_class text,
    latency_ms integer
);

COMMENT ON TYPE lease.release_request IS
    'A release''s request apart from its identity: the second argument of lease.release_brief_typed, an element of lease.release_many_brief_typed''s second (migration 0030); lease.renew_request without ttl_ms. The rules of each field are lease._end_t''s (docs/sql-api.md, "Typed calls"). New optional fields are appended.';

DROP FUNCTION IF EXISTS lease.renew_brief_typed(text, text, text, text, text, text, text, text,
    bigint, bigint, text, text, text, text, text, text, timestamptz, text, text, text, integer,
    boolean);
DROP FUNCTION IF EXISTS lease.release_brief_typed(text, text, text, text, text, text, text, text,
    bigint, text, text, text, text, text, text, timestamptz, text, text, text, integer);
DROP FUNCTION IF EXISTS lease.renew_many_brief_typed(text[], text[], text[], text[], text[],
    text[], text[], text[], bigint[], bigint[], text[], text[], text[], text[], text[], text[],
    timestamptz[], text[], text[], text[], integer[]);
DROP FUNCTION IF EXISTS lease.release_many_brief_typed(text[], text[], text[], text[], text[],
    text[], text[], text[], bigint[], text[], text[], text[], text[], text[], text[],
    timestamptz[], text[], text[], text[], integer[]);
