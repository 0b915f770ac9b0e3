-- 0002: tables.
--
-- Layout rule (docs/schema.md, measured in tests/bench): each identity's live
-- state is ONE row that exists (lease.locks: durable counter + current lease),
-- upserted once and then only updated; the hot path reads only rows that
-- exist, by unique key. History, idempotency and audit are append-only on the
-- hot path: written, never scanned. No small hot table, no sequence-ordered
-- index that every transaction reads.

-- Policy: one row. Operators change it with UPDATE; CHECKs keep it coherent.
CREATE TABLE lease.policy (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    minimum_ttl_ms bigint NOT NULL DEFAULT 1000,            -- exclusive lower bound
    default_ttl_ms bigint NOT NULL DEFAULT 30000,
    maximum_ttl_ms bigint NOT NULL DEFAULT 300000,          -- inclusive upper bound
    maximum_lifetime_ms bigint NOT NULL DEFAULT 3600000,
    max_page_size integer NOT NULL DEFAULT 500,
    default_page_size integer NOT NULL DEFAULT 100,
    idempotency_retention_ms bigint NOT NULL DEFAULT 86400000,
    history_retention_ms bigint NOT NULL DEFAULT 2592000000, -- 30 days
    audit_retention_ms bigint NOT NULL DEFAULT 7776000000,   -- 90 days
    -- 2^53 - 1: every token stays exact in JSON clients; never wraps.
    token_limit bigint NOT NULL DEFAULT 9007199254740991,
    epoch_stride bigint NOT NULL DEFAULT 1000000000,
    seal_on_timeline_change boolean NOT NULL DEFAULT true,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (minimum_ttl_ms > 0),
    CHECK (minimum_ttl_ms < default_ttl_ms AND default_ttl_ms <= maximum_ttl_ms),
    CHECK (maximum_lifetime_ms > minimum_ttl_ms),
    CHECK (max_page_size BETWEEN 1 AND 10000),
    CHECK (default_page_size BETWEEN 1 AND max_page_size),
    -- replays must be answerable for as long as any lease can live
    CHECK (idempotency_retention_ms > maximum_lifetime_ms),
    CHECK (history_retention_ms >= idempotency_retention_ms),
    CHECK (audit_retention_ms >= history_retention_ms),
    CHECK (token_limit > 0 AND epoch_stride > 0)
);
INSERT INTO lease.policy DEFAULT VALUES;

-- The namespace: the cluster it was last proven on, and whether it is sealed
-- (after a restore or failover: no acquisition until lease.recover_epoch).
CREATE TABLE lease.namespace_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    system_identifier numeric,
    timeline_id integer,
    epoch integer NOT NULL DEFAULT 0,
    sealed boolean NOT NULL DEFAULT false,
    sealed_reason text,
    sealed_at timestamptz,
    checked_at timestamptz,
    CHECK (sealed = (sealed_reason IS NOT NULL))
);
INSERT INTO lease.namespace_state DEFAULT VALUES;

-- Keys for values the database itself signs (list page tokens).
CREATE TABLE lease.secrets (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    page_token_key bytea NOT NULL CHECK (length(page_token_key) = 32)
);
INSERT INTO lease.secrets (page_token_key)
VALUES (sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text
                          || clock_timestamp()::text, 'UTF8')));

-- One row per lock identity: its durable fencing counter and its live lease.
-- The row is never deleted; state 'free' means no lease. An 'active' row past
-- expires_at is expired: every function treats it so before deciding.
CREATE TABLE lease.locks (
    lock_key text PRIMARY KEY,
    tenant_id text NOT NULL,
    program_id text NOT NULL,
    target_namespace text NOT NULL,
    target_id text NOT NULL,
    actor_name text NOT NULL,
    workflow_name text NOT NULL,
    operation_class text NOT NULL,
    record_version smallint NOT NULL DEFAULT 1,
    fencing_counter bigint NOT NULL CHECK (fencing_counter >= 0),
    created_at timestamptz NOT NULL,
    state text NOT NULL CHECK (state IN ('free', 'active')),
    lease_id text,
    fencing_token bigint,
    owner_principal_id text,
    owner_client_id text,
    owner_credential_id text,
    service_instance_id text,
    acquired_at timestamptz,
    renewed_at timestamptz,
    expires_at timestamptz,
    ttl_ms bigint,
    maximum_lifetime_ms bigint,
    execution_id text,
    job_id text,
    trace_id text,
    request_id text,
    metadata jsonb,
    CHECK (state = 'free' AND lease_id IS NULL AND fencing_token IS NULL
           OR state = 'active'
              AND lease_id IS NOT NULL AND fencing_token IS NOT NULL
              AND owner_principal_id IS NOT NULL AND owner_client_id IS NOT NULL
              AND owner_credential_id IS NOT NULL AND service_instance_id IS NOT NULL
              AND acquired_at IS NOT NULL AND renewed_at IS NOT NULL AND expires_at IS NOT NULL
              AND ttl_ms IS NOT NULL AND maximum_lifetime_ms IS NOT NULL
              AND execution_id IS NOT NULL AND job_id IS NOT NULL AND request_id IS NOT NULL
              AND metadata IS NOT NULL
              AND fencing_token BETWEEN 1 AND fencing_counter
              AND renewed_at >= acquired_at
              AND expires_at <= acquired_at + maximum_lifetime_ms * interval '1 millisecond')
) WITH (fillfactor = 80); -- room for HOT updates: renewals change no indexed column

-- One row per tuple, and lists walk this index in identity order. The
-- primary key is a SHA-256 of the tuple; this index makes a second row
-- claiming the same tuple (an edited or corrupt row) impossible.
CREATE UNIQUE INDEX locks_identity ON lease.locks (tenant_id, program_id, target_namespace,
                                                   target_id, actor_name, workflow_name,
                                                   operation_class);

-- Which identity a lease id belongs to (inspect by id). A separate
-- append-only table rather than an index on lease.locks(lease_id): no index
-- of lease.locks covers a column that acquire, renew or release change, so
-- those updates stay HOT and write no index page another transaction's
-- predicate locks could cover. A lease id is never reused.
CREATE TABLE lease.lease_index (
    lease_id text PRIMARY KEY,
    lock_key text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX lease_index_created_at ON lease.lease_index (created_at);

-- Terminal leases: expired, released, revoked. Append-only on the hot path.
CREATE TABLE lease.history (
    lease_id text PRIMARY KEY,
    lock_key text NOT NULL,
    tenant_id text NOT NULL,
    program_id text NOT NULL,
    target_namespace text NOT NULL,
    target_id text NOT NULL,
    actor_name text NOT NULL,
    workflow_name text NOT NULL,
    operation_class text NOT NULL,
    record_version smallint NOT NULL DEFAULT 1,
    fencing_token bigint NOT NULL CHECK (fencing_token > 0),
    owner_principal_id text NOT NULL,
    owner_client_id text NOT NULL,
    owner_credential_id text NOT NULL,
    service_instance_id text NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    ttl_ms bigint NOT NULL,
    maximum_lifetime_ms bigint NOT NULL,
    execution_id text NOT NULL,
    job_id text NOT NULL,
    trace_id text,
    request_id text NOT NULL,
    metadata jsonb NOT NULL,
    state text NOT NULL CHECK (state IN ('expired', 'released', 'revoked')),
    ended_at timestamptz NOT NULL,
    ended_by_principal_id text,   -- NULL for expiry
    ended_by_credential_id text,
    end_reason text,              -- administrator reason (force-release, revoke)
    incident_id text,
    CHECK (state = 'expired' OR ended_by_principal_id IS NOT NULL)
);
CREATE INDEX history_lock_key ON lease.history (lock_key, fencing_token);
CREATE INDEX history_ended_at ON lease.history (ended_at);

-- Idempotency: the typed result of each state-changing request, stored in the
-- same transaction as the mutation. The key leads with the lock key (a
-- SHA-256), so probes of absent keys spread over the whole index.
CREATE TABLE lease.idempotency (
    lock_key text NOT NULL,
    operation text NOT NULL CHECK (operation IN ('acquire', 'renew', 'release',
                                                 'force_release', 'revoke', 'commit')),
    owner_principal_id text NOT NULL,
    request_id text NOT NULL,
    request_digest bytea NOT NULL CHECK (length(request_digest) = 32),
    result jsonb NOT NULL,
    lease_id text,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (lock_key, operation, owner_principal_id, request_id)
);
CREATE INDEX idempotency_expires_at ON lease.idempotency (expires_at);

-- Audit events: append-only (a trigger refuses UPDATE, and DELETE outside the
-- retention function). Never credential material, metadata, bodies or keys.
CREATE TABLE lease.audit_events (
    event_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    latency_ms integer,
    event_type text NOT NULL CHECK (event_type IN (
        'target_lease_acquire', 'target_lease_renew', 'target_lease_release',
        'target_lease_force_release', 'target_lease_revoke', 'target_lease_inspect',
        'target_lease_list', 'target_lease_commit', 'target_lease_commit_rejected',
        'target_lease_recover', 'target_lease_quarantine', 'target_lease_alert',
        'target_lease_authenticate', 'credential_create', 'credential_revoke')),
    priority text NOT NULL DEFAULT 'normal' CHECK (priority IN ('normal', 'high')),
    decision text NOT NULL CHECK (decision IN ('allow', 'deny', 'error')),
    result_code text NOT NULL,
    retryable boolean NOT NULL DEFAULT false,
    backend_health text NOT NULL DEFAULT 'ok'
        CHECK (backend_health IN ('ok', 'degraded', 'unavailable')),
    request_id text,
    correlation_id text,
    trace_id text,
    execution_id text,
    job_id text,
    principal_class text,
    principal_id text,
    credential_id text,
    service_instance_id text,
    tenant_id text,
    program_id text,
    target_namespace text,
    target_id text,
    actor_name text,
    workflow_name text,
    operation_class text,
    lease_id text,
    fencing_token bigint,
    requested_ttl_ms bigint,
    effective_ttl_ms bigint,
    deadline_class text,
    previous_state text,
    resulting_state text,
    reason text,
    incident_id text
);
CREATE INDEX audit_events_occurred_at ON lease.audit_events (occurred_at);
CREATE INDEX audit_events_lease_id ON lease.audit_events (lease_id) WHERE lease_id IS NOT NULL;

-- Credentials: only a digest of the secret (docs/credentials.md).
CREATE TABLE lease.credentials (
    credential_id text PRIMARY KEY CHECK (credential_id ~ '^key_[a-z2-7]{26}$'),
    principal_id text NOT NULL,
    client_id text NOT NULL,
    tenant_id text NOT NULL,
    program_id text NOT NULL,            -- '*' for administrators only
    actor_names text[] NOT NULL,         -- '{*}' for every actor
    capabilities text[] NOT NULL CHECK (capabilities <@ ARRAY['targets:lease', 'targets:read',
        'targets:force-release', 'targets:revoke', 'audit:read']::text[]),
    admin boolean NOT NULL DEFAULT false,
    secret_digest bytea NOT NULL CHECK (length(secret_digest) = 32),
    description text,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz,
    CHECK (program_id <> '*' OR admin),
    CHECK (admin OR NOT capabilities && ARRAY['targets:force-release', 'targets:revoke']::text[]),
    CHECK (cardinality(actor_names) BETWEEN 1 AND 32)
);

-- Fencing high-water mark per identity: the highest token a fenced write
-- accepted. Separate from lease.locks so commits do not write the lease row
-- (a renewal and a commit of the same holder do not conflict).
CREATE TABLE lease.fence_marks (
    lock_key text PRIMARY KEY,
    high_water_token bigint NOT NULL CHECK (high_water_token > 0),
    updated_at timestamptz NOT NULL
);

-- Documents written through the commit coordinator, scoped by identity.
CREATE TABLE lease.fenced_documents (
    lock_key text NOT NULL,
    document_key text NOT NULL,
    revision bigint NOT NULL CHECK (revision > 0),
    body jsonb NOT NULL,
    fencing_token bigint NOT NULL,
    lease_id text NOT NULL,
    execution_id text NOT NULL,
    trace_id text,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (lock_key, document_key)
);

-- Publications waiting to be made visible by a relay (RabbitMQ, CouchDB);
-- each carries the token that authorised it.
CREATE TABLE lease.outbox (
    outbox_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lock_key text NOT NULL,
    topic text NOT NULL,
    payload jsonb NOT NULL,
    fencing_token bigint NOT NULL,
    lease_id text NOT NULL,
    execution_id text NOT NULL,
    trace_id text,
    created_at timestamptz NOT NULL,
    published_at timestamptz
);
CREATE INDEX outbox_unpublished ON lease.outbox (outbox_id) WHERE published_at IS NULL;

-- Records an operation refused because the stored record was corrupt.
CREATE TABLE lease.quarantine (
    quarantine_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lock_key text NOT NULL,
    operation text NOT NULL,
    detail text NOT NULL,
    stored_record jsonb,
    detected_at timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    resolution text
);
CREATE UNIQUE INDEX quarantine_open ON lease.quarantine (lock_key) WHERE resolved_at IS NULL;

-- Recovery log: every epoch raise, why, by whom.
CREATE TABLE lease.recoveries (
    recovery_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    epoch integer NOT NULL,
    reason text NOT NULL,
    floor_token bigint,
    counters_raised bigint NOT NULL,
    leases_revoked bigint NOT NULL,
    performed_by text NOT NULL,
    performed_at timestamptz NOT NULL
);
