package leaseclient

import (
	"encoding/json"
	"time"
)

// Identity is a lock identity (docs/api.md). OperationClass "" means
// "default".
type Identity struct {
	TenantID        string `json:"tenant_id"`
	ProgramID       string `json:"program_id"`
	TargetNamespace string `json:"target_namespace"`
	TargetID        string `json:"target_id"`
	ActorName       string `json:"actor_name"`
	WorkflowName    string `json:"workflow_name"`
	OperationClass  string `json:"operation_class,omitempty"`
}

// LeaseRecord is a lease record: the service's lease object (docs/api.md),
// as acquire, renew, inspect, watch and list answer it. The same thing is
// LeaseRecord in the Python client and lease_record_t in C
// (docs/clients.md, "Names").
type LeaseRecord struct {
	Identity          Identity        `json:"lock_identity"`
	LeaseID           string          `json:"lease_id"`
	FencingToken      int64           `json:"fencing_token"`
	AcquiredAt        time.Time       `json:"acquired_at"`
	RenewedAt         time.Time       `json:"renewed_at"`
	ExpiresAt         time.Time       `json:"expires_at"`
	EndedAt           *time.Time      `json:"ended_at,omitempty"`
	TTLMS             int64           `json:"ttl_ms"`
	MaximumLifetimeMS int64           `json:"maximum_lifetime_ms"`
	ServiceInstanceID string          `json:"service_instance_id,omitempty"`
	ExecutionID       string          `json:"execution_id,omitempty"`
	JobID             string          `json:"job_id,omitempty"`
	TraceID           string          `json:"trace_id,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	State             string          `json:"state"`
	OwnerPrincipalID  string          `json:"owner_principal_id,omitempty"`
	OwnerClientID     string          `json:"owner_client_id,omitempty"`
}

// Answer is what every successful call shares.
type Answer struct {
	Code          string // lease_acquired, lease_renewed, ...
	CorrelationID string
	Replayed      bool   // the request id's stored result, not a new execution
	CurrentState  string // replays: the lease's state now
	// WaitedMS: lease_acquired only, how long leased held the request
	// before the attempt that granted it began (absent: 0).
	WaitedMS  int64
	RequestID string // mutations
	// FirstSent is the monotonic time the request id was first sent (by
	// this call, or by an earlier call with the same request value);
	// Answered when the answer arrived. The renewal schedule starts from
	// them (Anchor).
	FirstSent time.Time
	Answered  time.Time
}

// LeaseAnswer is the answer of acquire, renew, release, force-release,
// revoke, inspect and watch.
type LeaseAnswer struct {
	Answer
	Lease LeaseRecord
}

// ListAnswer is one page of a list.
type ListAnswer struct {
	Answer
	Leases        []LeaseRecord
	NextPageToken string // "" on the last page
}

// CommitResult is one write's result.
type CommitResult struct {
	Kind     string `json:"kind"`
	Key      string `json:"key,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	Topic    string `json:"topic,omitempty"`
	OutboxID int64  `json:"outbox_id,omitempty"`
}

// CommitAnswer is the answer of a fenced commit.
type CommitAnswer struct {
	Answer
	LeaseID      string
	FencingToken int64
	Results      []CommitResult
}

// Write is one write of a commit: Document or Publication.
type Write struct {
	Kind             string `json:"kind"`
	Key              string `json:"key,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
	Body             any    `json:"body,omitempty"`
	Topic            string `json:"topic,omitempty"`
	Payload          any    `json:"payload,omitempty"`
}

// Document writes body under key if its revision is expectedRevision (0:
// it must not exist yet).
func Document(key string, expectedRevision int64, body any) Write {
	r := expectedRevision
	return Write{Kind: "document", Key: key, ExpectedRevision: &r, Body: body}
}

// Publication publishes payload (a JSON object) on topic through the outbox.
func Publication(topic string, payload any) Write {
	return Write{Kind: "publication", Topic: topic, Payload: payload}
}

// Requests. A mutation's RequestID, and the ids an acquire or commit
// generates when empty, are written back into the request value on its
// first use: passing the same value again repeats the request exactly,
// which is how an unknown outcome is resolved. firstSent remembers when
// the request id was first sent.

// AcquireRequest: POST /v1/leases/acquire.
type AcquireRequest struct {
	RequestID         string
	Identity          Identity
	ServiceInstanceID string // default <hostname>-<pid>
	ExecutionID       string // default exec_<random>
	JobID             string // default job_<random>
	TraceID           string
	TTL               time.Duration // 0: the service's default
	MaximumLifetime   time.Duration
	Wait              time.Duration // retry a conflict for up to this long (wait_ms)
	Metadata          map[string]any
	// SessionID acquires the lease in that session (SessionOpen), which
	// keeps it alive: lease_lost when it is not open and the caller's
	SessionID string
	firstSent time.Time
}

// OwnerRequest: renew and release of a held lease.
type OwnerRequest struct {
	RequestID         string
	Identity          Identity
	LeaseID           string
	FencingToken      int64
	ServiceInstanceID string
	TTL               time.Duration // renew only; 0: the lease's own
	firstSent         time.Time
}

// AdminRequest: force-release and revoke (administrator credentials).
type AdminRequest struct {
	RequestID    string
	Identity     Identity
	LeaseID      string
	FencingToken int64
	Reason       string
	IncidentID   string // revoke only
	firstSent    time.Time
}

// CommitRequest: POST /v1/commits.
type CommitRequest struct {
	RequestID    string
	Identity     Identity
	LeaseID      string
	FencingToken int64
	ExecutionID  string // the lease's execution id
	TraceID      string // default: a random 32-hex trace id
	Writes       []Write
	firstSent    time.Time
}

// ListRequest: POST /v1/leases/list. By is "owner", "program" or "target".
type ListRequest struct {
	By              string
	TenantID        string
	ProgramID       string
	TargetNamespace string
	TargetID        string
	PageSize        int
	PageToken       string
}
