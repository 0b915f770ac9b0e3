package leaseclient

// Sessions (docs/api.md, "Sessions"; PostgreSQL backend only: another
// answers invalid_lease_request naming session_id): one keep-alive keeps
// every lease acquired in a session alive. These are the calls; the hold
// layer's use of them is session_keeper.go.

import (
	"context"
	"net/url"
	"time"
)

// SessionRecord is a session as the service answered it. Its leases live
// while it does (each also within its own maximum lifetime).
type SessionRecord struct {
	SessionID         string    `json:"session_id"`
	TenantID          string    `json:"tenant_id"`
	OwnerPrincipalID  string    `json:"owner_principal_id"`
	OwnerCredentialID string    `json:"owner_credential_id"`
	ServiceInstanceID string    `json:"service_instance_id"`
	TTLMS             int64     `json:"ttl_ms"`
	CreatedAt         time.Time `json:"created_at"`
	RenewedAt         time.Time `json:"renewed_at"`
	ExpiresAt         time.Time `json:"expires_at"`
	State             string    `json:"state"` // open, expired, closed
}

// SessionGrant is G of a session's answer: min(ttl_ms, expires_at -
// renewed_at), never negative.
func SessionGrant(s *SessionRecord) time.Duration {
	g := s.ExpiresAt.Sub(s.RenewedAt)
	if ttl := time.Duration(s.TTLMS) * time.Millisecond; ttl < g {
		g = ttl
	}
	if g < 0 {
		return 0
	}
	return g
}

// SessionAnswer is the answer of SessionOpen, SessionKeepalive and
// SessionClose (LeasesEnded and More: close only).
type SessionAnswer struct {
	Answer
	Session     SessionRecord
	LeasesEnded int64 // leases the close ended now
	More        bool  // the sweeper ends the rest
}

// SessionOpenRequest: POST /v1/sessions.
type SessionOpenRequest struct {
	RequestID         string
	ServiceInstanceID string        // default <hostname>-<pid>
	TTL               time.Duration // 0: the service's default
	firstSent         time.Time
}

// SessionCloseRequest: POST /v1/sessions/{session_id}/close.
type SessionCloseRequest struct {
	RequestID string
	SessionID string
	firstSent time.Time
}

// SessionOpen opens a session of this credential. Acquire with its
// SessionID (AcquireRequest.SessionID); one SessionKeepalive then keeps
// every lease in it alive.
func (c *Client) SessionOpen(ctx context.Context, r *SessionOpenRequest) (*SessionAnswer, error) {
	if r.RequestID == "" {
		r.RequestID = newID("req_")
	}
	if r.ServiceInstanceID == "" {
		r.ServiceInstanceID = hostInstance()
	}
	body := map[string]any{"request_id": r.RequestID, "service_instance_id": r.ServiceInstanceID}
	if r.TTL > 0 {
		body["ttl_ms"] = ms(r.TTL)
	}
	env, a, err := c.do(ctx, call{method: "POST", path: "/v1/sessions", body: body,
		requestID: r.RequestID, firstSent: &r.firstSent})
	return sessionAnswer(env, a, err)
}

// SessionKeepalive extends the session, and so every lease in it, to the
// service's now plus its TTL: ErrLeaseLost when it is closed, expired,
// unknown or another's. It takes no request id (repeating it extends
// again): an answer lost after sending is resent until ctx ends, then it
// is lease_outcome_unknown.
func (c *Client) SessionKeepalive(ctx context.Context, sessionID string) (*SessionAnswer, error) {
	path, err := sessionPath(sessionID, "keepalive")
	if err != nil {
		return nil, err
	}
	var first time.Time
	env, a, err := c.do(ctx, call{method: "POST", path: path, body: map[string]any{},
		byValue: true, firstSent: &first})
	return sessionAnswer(env, a, err)
}

// SessionClose ends the session and every lease in it (idempotent by
// request id).
func (c *Client) SessionClose(ctx context.Context, r *SessionCloseRequest) (*SessionAnswer, error) {
	path, err := sessionPath(r.SessionID, "close")
	if err != nil {
		return nil, err
	}
	if r.RequestID == "" {
		r.RequestID = newID("req_")
	}
	env, a, err := c.do(ctx, call{method: "POST", path: path,
		body: map[string]any{"request_id": r.RequestID}, requestID: r.RequestID,
		firstSent: &r.firstSent})
	return sessionAnswer(env, a, err)
}

func sessionPath(id, verb string) (string, error) {
	if id == "" || len(id) > 128 {
		return "", &Error{Code: CodeInvalidLeaseRequest, ClientMade: true, Field: "session_id",
			Message: "session_id must have 1..128 characters"}
	}
	return "/v1/sessions/" + url.PathEscape(id) + "/" + verb, nil
}

// sessionAnswer refuses a success without a readable session (a lease
// where the session belongs, a missing id, TTL or time): a mutation
// answered so may have happened, so it is lease_outcome_unknown. Wrong
// JSON types already failed decoding (decodeAnswer).
func sessionAnswer(env envelope, a Answer, err error) (*SessionAnswer, error) {
	if err != nil {
		return nil, err
	}
	s := env.Session
	if s == nil || s.SessionID == "" || s.State == "" || s.TTLMS < 1 || s.ExpiresAt.IsZero() ||
		s.RenewedAt.IsZero() || (env.LeasesEnded != nil && *env.LeasesEnded < 0) {
		return nil, &Error{Code: CodeLeaseOutcomeUnknown, ClientMade: true, Retryable: true,
			RequestID: a.RequestID, Message: "a success answer without a readable session"}
	}
	sa := &SessionAnswer{Answer: a, Session: *s}
	if env.LeasesEnded != nil {
		sa.LeasesEnded = *env.LeasesEnded
	}
	if env.More != nil {
		sa.More = *env.More
	}
	return sa, nil
}
