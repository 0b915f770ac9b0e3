-- 0021: the typed calls answer in typed columns (docs/sql-api.md, "Typed
-- calls").
--
-- lease.acquire_brief_typed, renew_brief_typed and release_brief_typed
-- took typed arguments but still answered a jsonb document, which the
-- service printed as text and parsed again (about a fifth of the
-- instructions leased spends on a request, docs/benchmarks.md). They now
-- answer one row of lease.answer: the same answer's members as columns,
-- the lease record's flattened beside the code. A result type is not
-- something CREATE OR REPLACE can change, so the three go here and their
-- new definitions come from sql/lease/ (docs/schema.md). On a fresh
-- install they do not exist yet at this point: IF EXISTS.

CREATE TYPE lease.answer AS (
    code text,
    replayed boolean,
    current_state text,
    retry_after_ms bigint,
    field text,
    reason text,
    detail text,
    lease_id text,
    fencing_token bigint,
    state text,
    acquired_at text,
    renewed_at text,
    expires_at text,
    ended_at text,
    ttl_ms bigint,
    maximum_lifetime_ms bigint,
    owner_principal_id text,
    owner_client_id text,
    owner_credential_id text,
    service_instance_id text,
    execution_id text,
    job_id text,
    trace_id text,
    request_id text,
    end_reason text,
    incident_id text,
    metadata jsonb
);

COMMENT ON TYPE lease.answer IS
    'The answer of a typed call (lease.acquire_brief_typed, renew_brief_typed, release_brief_typed) as columns: the members of the jsonb answer the same decision gives (code, replayed, current_state, retry_after_ms, field, reason, detail), then those of its lease record (NULL state: no lease). Times are RFC 3339 text, as in the jsonb answers; lease._answer_of turns a jsonb answer into one.';

DROP FUNCTION IF EXISTS lease.acquire_brief_typed(text, text, text, text, text, text, text, text,
    text, text, text, bigint, bigint, jsonb, text, text, text, text, text, text, timestamptz, text,
    text, integer);
DROP FUNCTION IF EXISTS lease.renew_brief_typed(text, text, text, text, text, text, text, text,
    bigint, bigint, text, text, text, text, text, text, timestamptz, text, text, text, integer);
DROP FUNCTION IF EXISTS lease.release_brief_typed(text, text, text, text, text, text, text, text,
    bigint, text, text, text, text, text, text, timestamptz, text, text, text, integer);
