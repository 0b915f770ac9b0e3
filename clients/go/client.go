package leaseclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds a call whose context has no deadline (an acquire
// with a wait gets the wait plus this, at most 30 s, like leasectl).
const DefaultTimeout = 5 * time.Second

// Client calls one leased. Safe for concurrent use. The token is sent only
// in the Authorization header and never appears in errors.
type Client struct {
	base  string
	token string
	http  *http.Client
	// the one goroutine that renews every lease held through this client
	// (renewals.go), made on the first Hold
	groupOnce sync.Once
	group     *renewalGroup
}

// New returns a client of the leased at baseURL ("http://127.0.0.1:8080")
// with a bearer token ("lsk_..."). httpClient nil: a client of its own
// (keep-alive, no timeouts of its own: every call's context bounds it).
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		httpClient = &http.Client{Transport: tr}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: httpClient}
}

// FromEnv is New(LEASE_URL, LEASE_TOKEN, nil), LEASE_URL defaulting to
// http://127.0.0.1:8080 like leasectl.
func FromEnv() *Client {
	u := os.Getenv("LEASE_URL")
	if u == "" {
		u = "http://127.0.0.1:8080"
	}
	return New(u, os.Getenv("LEASE_TOKEN"), nil)
}

type wireDeadlineKey struct{}

// WithWireDeadline makes the calls under ctx send deadline_at t to the
// service instead of the context's remaining time as deadline_ms: the
// service judges it (a past t answers deadline_exceeded without touching
// the database). The context still bounds the wait for the answer.
func WithWireDeadline(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, wireDeadlineKey{}, t)
}

// call is one route's request.
type call struct {
	method, path string
	body         map[string]any // nil: no body (GET)
	requestID    string         // mutations: resend until a typed answer
	firstSent    *time.Time     // the request value's, kept across calls
	timeout      time.Duration  // used when ctx has no deadline
	// byValue: a write idempotent by value (a session's keep-alive), resent
	// like a mutation when its answer is lost, with no request id (the
	// route takes none)
	byValue bool
}

// envelope is every answer's shape.
type envelope struct {
	Status          string            `json:"status"`
	Code            string            `json:"code"`
	Msg             string            `json:"msg"`
	CorrelationID   string            `json:"correlation_id"`
	Retryable       bool              `json:"retryable"`
	RetryAfterMS    int64             `json:"retry_after_ms"`
	Field           string            `json:"field"`
	CurrentRevision *int64            `json:"current_revision"`
	Replayed        bool              `json:"replayed"`
	CurrentState    string            `json:"current_state"`
	WaitedMS        int64             `json:"waited_ms"`
	Lease           *LeaseRecord      `json:"lease"`
	Leases          []LeaseRecord     `json:"leases"`
	NextPageToken   string            `json:"next_page_token"`
	Commit          *commitEnvelope   `json:"commit"`
	Results         []json.RawMessage `json:"results"`      // renew-batch, release-batch
	Session         *SessionRecord    `json:"session"`      // sessions
	LeasesEnded     *int64            `json:"leases_ended"` // session close
	More            *bool             `json:"more"`         // session close
}

type commitEnvelope struct {
	LeaseID      string         `json:"lease_id"`
	FencingToken int64          `json:"fencing_token"`
	Results      []CommitResult `json:"results"`
}

// decodeAnswer turns one HTTP answer into an envelope or a typed *Error.
// ok false: no typed envelope (a proxy's page, a cut body).
func decodeAnswer(status int, body []byte) (env envelope, typedErr *Error, ok bool) {
	if err := json.Unmarshal(body, &env); err != nil || env.Code == "" ||
		(env.Status != "success" && env.Status != "error") {
		return env, nil, false
	}
	if env.Status == "success" {
		return env, nil, true
	}
	e := &Error{Code: Code(env.Code), HTTPStatus: status, Message: env.Msg,
		CorrelationID: env.CorrelationID, Retryable: env.Retryable,
		RetryAfter: time.Duration(env.RetryAfterMS) * time.Millisecond, Field: env.Field}
	if env.CurrentRevision != nil {
		e.CurrentRevision, e.HasCurrentRevision = *env.CurrentRevision, true
	}
	return env, e, true
}

// do runs a call. A mutation whose answer is lost after it may have been
// sent (transport error once connected, a 5xx without a typed envelope,
// a typed lease_outcome_unknown) is resent with the same request id and
// body until a typed answer arrives or the deadline passes; then it is
// lease_outcome_unknown carrying the request id (docs/executor.md,
// "Unknown outcomes and request ids").
func (c *Client) do(ctx context.Context, k call) (envelope, Answer, error) {
	env, ans, err := c.exchange(ctx, k)
	if err != nil && ctx.Err() != nil {
		// run under a held lease's Context, cut short by its end
		if l, ok := ctx.Value(heldLeaseKey{}).(*HeldLease); ok {
			err = l.endedError(ctx, err)
		}
	}
	return env, ans, err
}

func (c *Client) exchange(ctx context.Context, k call) (envelope, Answer, error) {
	ans := Answer{RequestID: k.requestID}
	if _, has := ctx.Deadline(); !has {
		t := k.timeout
		if t <= 0 {
			t = DefaultTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	mutation := k.requestID != "" || k.byValue
	everSent := k.firstSent != nil && !k.firstSent.IsZero()
	var lastErr error
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return envelope{}, ans, c.giveUp(k, everSent, err, lastErr)
		}
		var payload []byte
		if k.body != nil {
			body := make(map[string]any, len(k.body)+1)
			for key, v := range k.body {
				body[key] = v
			}
			if t, ok := ctx.Value(wireDeadlineKey{}).(time.Time); ok {
				body["deadline_at"] = t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			} else if d, has := ctx.Deadline(); has {
				ms := time.Until(d).Milliseconds()
				if ms < 1 {
					ms = 1
				}
				body["deadline_ms"] = ms
			}
			var err error
			if payload, err = json.Marshal(body); err != nil {
				return envelope{}, ans, &Error{Code: CodeInvalidLeaseRequest, ClientMade: true,
					Message: "request cannot be encoded", Err: err, RequestID: k.requestID}
			}
		}
		// a request that got a connection may have reached leased; one
		// refused before that cannot have happened
		var connected atomic.Bool
		trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
			connected.Store(true)
		}}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace),
			k.method, c.base+k.path, bytes.NewReader(payload))
		if err != nil {
			return envelope{}, ans, &Error{Code: CodeInvalidLeaseRequest, ClientMade: true,
				Message: "bad URL", Err: err}
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		sentAt := time.Now()
		resp, err := c.http.Do(req)
		var raw []byte
		tooLarge := false
		if err == nil {
			// never more than MaxAnswerBytes in memory, whatever is offered
			raw, err = io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
			resp.Body.Close()
			if tooLarge = len(raw) > MaxAnswerBytes; tooLarge {
				raw = nil
			}
		}
		if connected.Load() && k.firstSent != nil && k.firstSent.IsZero() {
			*k.firstSent = sentAt
		}
		everSent = everSent || connected.Load()
		if err != nil {
			lastErr = err
			if !mutation || !everSent {
				return envelope{}, ans, c.giveUp(k, everSent, ctx.Err(), err)
			}
		} else {
			env, typed, ok := decodeAnswer(resp.StatusCode, raw)
			ans.Answered = time.Now()
			if k.firstSent != nil {
				ans.FirstSent = *k.firstSent
			} else {
				ans.FirstSent = sentAt
			}
			switch {
			case ok && typed == nil:
				ans.Code, ans.CorrelationID = env.Code, env.CorrelationID
				ans.Replayed, ans.CurrentState, ans.WaitedMS = env.Replayed, env.CurrentState, env.WaitedMS
				return env, ans, nil
			case ok && !(mutation && typed.Code == CodeLeaseOutcomeUnknown):
				typed.RequestID = k.requestID
				return env, ans, typed
			case ok:
				lastErr = typed
			// a mutation answered 2xx or 5xx without a readable envelope (a
			// proxy's page, a cut, oversized or garbled body) may have
			// happened: resend it; anything else is refused here
			case !mutation || resp.StatusCode < 200 || (resp.StatusCode >= 300 && resp.StatusCode < 500):
				return envelope{}, ans, &Error{Code: CodeLeaseBackendUnavailable, ClientMade: true,
					HTTPStatus: resp.StatusCode, RequestID: k.requestID,
					Message: unreadable(resp.StatusCode, tooLarge)}
			default:
				lastErr = errors.New(unreadable(resp.StatusCode, tooLarge))
			}
		}
		// a mutation that may have happened: resend the same request
		d, has := ctx.Deadline()
		if wait := time.Until(d); has && wait < backoff {
			backoff = wait
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > time.Second {
			backoff = time.Second
		}
	}
}

// MaxAnswerBytes is the most of an answer's body the client reads: a
// larger one is refused as unreadable, never held in memory whole.
const MaxAnswerBytes = 8 << 20

func unreadable(status int, tooLarge bool) string {
	if tooLarge {
		return fmt.Sprintf("answer larger than %d bytes (HTTP %d)", MaxAnswerBytes, status)
	}
	return fmt.Sprintf("answer without a typed envelope (HTTP %d)", status)
}

// giveUp is the error of a call that ended without a typed answer.
func (c *Client) giveUp(k call, everSent bool, ctxErr, cause error) error {
	if cause == nil {
		cause = ctxErr
	}
	if (k.requestID != "" || k.byValue) && everSent {
		return &Error{Code: CodeLeaseOutcomeUnknown, ClientMade: true, RequestID: k.requestID,
			Retryable: true, Err: cause,
			Message: "no answer after the request was sent; it may have happened"}
	}
	if ctxErr != nil && errors.Is(ctxErr, context.DeadlineExceeded) {
		return &Error{Code: CodeDeadlineExceeded, ClientMade: true, RequestID: k.requestID,
			Retryable: true, Err: ctxErr, Message: "the deadline passed before an answer"}
	}
	if ctxErr != nil {
		return ctxErr // context.Canceled: the caller gave up
	}
	return &Error{Code: CodeLeaseBackendUnavailable, ClientMade: true, RequestID: k.requestID,
		Retryable: true, Err: cause, Message: "leased at " + c.base + " could not be reached"}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func hostInstance() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "host"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

func newTraceID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("leaseclient: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func leaseAnswer(env envelope, a Answer) *LeaseAnswer {
	la := &LeaseAnswer{Answer: a}
	if env.Lease != nil {
		la.Lease = *env.Lease
	}
	return la
}

// Acquire: POST /v1/leases/acquire. With Wait > 0 the service retries a
// conflict for up to that long; without a context deadline the call is
// bounded by Wait + 5 s (at most 30 s).
func (c *Client) Acquire(ctx context.Context, r *AcquireRequest) (*LeaseAnswer, error) {
	if r.RequestID == "" {
		r.RequestID = newID("req_")
	}
	if r.ServiceInstanceID == "" {
		r.ServiceInstanceID = hostInstance()
	}
	if r.ExecutionID == "" {
		r.ExecutionID = newID("exec_")
	}
	if r.JobID == "" {
		r.JobID = newID("job_")
	}
	body := map[string]any{"request_id": r.RequestID, "lock_identity": r.Identity,
		"service_instance_id": r.ServiceInstanceID, "execution_id": r.ExecutionID,
		"job_id": r.JobID}
	if r.TraceID != "" {
		body["trace_id"] = r.TraceID
	}
	if r.TTL > 0 {
		body["ttl_ms"] = ms(r.TTL)
	}
	if r.MaximumLifetime > 0 {
		body["maximum_lifetime_ms"] = ms(r.MaximumLifetime)
	}
	if r.Wait > 0 {
		body["wait_ms"] = ms(r.Wait)
	}
	if r.Metadata != nil {
		body["metadata"] = r.Metadata
	}
	if r.SessionID != "" {
		body["session_id"] = r.SessionID
	}
	timeout := DefaultTimeout + r.Wait
	if timeout > 30*time.Second {
		timeout = 30 * time.Second
	}
	env, a, err := c.do(ctx, call{method: "POST", path: "/v1/leases/acquire", body: body,
		requestID: r.RequestID, firstSent: &r.firstSent, timeout: timeout})
	if err != nil {
		return nil, err
	}
	return leaseAnswer(env, a), nil
}

func (c *Client) owner(ctx context.Context, path string, r *OwnerRequest, renew bool) (*LeaseAnswer, error) {
	if r.RequestID == "" {
		r.RequestID = newID("req_")
	}
	body := map[string]any{"request_id": r.RequestID, "lock_identity": r.Identity,
		"lease_id": r.LeaseID, "fencing_token": r.FencingToken,
		"service_instance_id": r.ServiceInstanceID}
	if renew && r.TTL > 0 {
		body["ttl_ms"] = ms(r.TTL)
	}
	env, a, err := c.do(ctx, call{method: "POST", path: path, body: body,
		requestID: r.RequestID, firstSent: &r.firstSent})
	if err != nil {
		return nil, err
	}
	return leaseAnswer(env, a), nil
}

// Renew: POST /v1/leases/renew.
func (c *Client) Renew(ctx context.Context, r *OwnerRequest) (*LeaseAnswer, error) {
	return c.owner(ctx, "/v1/leases/renew", r, true)
}

// Release: POST /v1/leases/release.
func (c *Client) Release(ctx context.Context, r *OwnerRequest) (*LeaseAnswer, error) {
	return c.owner(ctx, "/v1/leases/release", r, false)
}

// BatchMax is the most items RenewMany and ReleaseMany take in one call.
const BatchMax = 100

// BatchResult is one item's answer in a batch: what its own Renew (or
// Release) would have returned, a *LeaseAnswer or a typed *Error.
type BatchResult struct {
	Lease *LeaseAnswer
	Err   error
}

// RenewMany: POST /v1/leases/renew-batch, 1 to BatchMax renewals in one
// request and one database transaction. Each request keeps its own request
// id (generated and written back when empty, so passing the same values
// again repeats the batch exactly). The error is the whole call's
// (deadline, backend, a malformed or out-of-scope item); otherwise one
// result per request, in order: one item's ErrLeaseLost does not fail the
// others.
func (c *Client) RenewMany(ctx context.Context, rs []*OwnerRequest) ([]BatchResult, error) {
	return c.ownerBatch(ctx, "/v1/leases/renew-batch", "renewals", rs, true)
}

// ReleaseMany: POST /v1/leases/release-batch, as RenewMany for releases.
func (c *Client) ReleaseMany(ctx context.Context, rs []*OwnerRequest) ([]BatchResult, error) {
	return c.ownerBatch(ctx, "/v1/leases/release-batch", "releases", rs, false)
}

func (c *Client) ownerBatch(ctx context.Context, path, key string, rs []*OwnerRequest,
	renew bool) ([]BatchResult, error) {
	if len(rs) < 1 || len(rs) > BatchMax {
		return nil, &Error{Code: CodeInvalidLeaseRequest, ClientMade: true, Field: key,
			Message: fmt.Sprintf("%s must be 1 to %d items", key, BatchMax)}
	}
	items := make([]map[string]any, len(rs))
	var firstSent time.Time // the earliest first send of any item: the batch's anchor
	for i, r := range rs {
		if r.RequestID == "" {
			r.RequestID = newID("req_")
		}
		items[i] = map[string]any{"request_id": r.RequestID, "lock_identity": r.Identity,
			"lease_id": r.LeaseID, "fencing_token": r.FencingToken,
			"service_instance_id": r.ServiceInstanceID}
		if renew && r.TTL > 0 {
			items[i]["ttl_ms"] = ms(r.TTL)
		}
		if !r.firstSent.IsZero() && (firstSent.IsZero() || r.firstSent.Before(firstSent)) {
			firstSent = r.firstSent
		}
	}
	// requestID marks the call a mutation (resent on an unknown outcome);
	// the body's items carry the ids
	env, a, err := c.do(ctx, call{method: "POST", path: path, body: map[string]any{key: items},
		requestID: rs[0].RequestID, firstSent: &firstSent})
	for _, r := range rs {
		if r.firstSent.IsZero() {
			r.firstSent = firstSent
		}
	}
	if err != nil {
		return nil, err
	}
	if len(env.Results) != len(rs) {
		return nil, &Error{Code: CodeLeaseOutcomeUnknown, ClientMade: true, Retryable: true,
			RequestID: rs[0].RequestID, Message: "a decided batch without one result per item"}
	}
	out := make([]BatchResult, len(rs))
	for i, raw := range env.Results {
		item, typed, ok := decodeAnswer(http.StatusOK, raw) // the batch answered 200
		switch {
		case ok && typed == nil && item.Lease != nil:
			ia := a
			ia.Code, ia.RequestID, ia.Replayed, ia.CurrentState = item.Code, rs[i].RequestID,
				item.Replayed, item.CurrentState
			out[i].Lease = leaseAnswer(item, ia)
		case ok && typed != nil:
			typed.RequestID = rs[i].RequestID
			out[i].Err = typed
		default:
			out[i].Err = &Error{Code: CodeLeaseOutcomeUnknown, ClientMade: true, Retryable: true,
				RequestID: rs[i].RequestID, Message: "unreadable item of a batch answer"}
		}
	}
	return out, nil
}

func (c *Client) admin(ctx context.Context, path string, r *AdminRequest, revoke bool) (*LeaseAnswer, error) {
	if r.RequestID == "" {
		r.RequestID = newID("req_")
	}
	body := map[string]any{"request_id": r.RequestID, "lock_identity": r.Identity,
		"lease_id": r.LeaseID, "fencing_token": r.FencingToken, "reason": r.Reason}
	if revoke && r.IncidentID != "" {
		body["incident_id"] = r.IncidentID
	}
	env, a, err := c.do(ctx, call{method: "POST", path: path, body: body,
		requestID: r.RequestID, firstSent: &r.firstSent})
	if err != nil {
		return nil, err
	}
	return leaseAnswer(env, a), nil
}

// ForceRelease: POST /v1/leases/force-release (administrator,
// targets:force-release, Reason required).
func (c *Client) ForceRelease(ctx context.Context, r *AdminRequest) (*LeaseAnswer, error) {
	return c.admin(ctx, "/v1/leases/force-release", r, false)
}

// Revoke: POST /v1/leases/revoke (administrator, targets:revoke, Reason
// required).
func (c *Client) Revoke(ctx context.Context, r *AdminRequest) (*LeaseAnswer, error) {
	return c.admin(ctx, "/v1/leases/revoke", r, true)
}

// Inspect: GET /v1/leases/{id} (a lease of any state the caller may see).
func (c *Client) Inspect(ctx context.Context, leaseID string) (*LeaseAnswer, error) {
	env, a, err := c.do(ctx, call{method: "GET", path: "/v1/leases/" + url.PathEscape(leaseID)})
	if err != nil {
		return nil, err
	}
	return leaseAnswer(env, a), nil
}

// InspectIdentity: POST /v1/leases/inspect, the active lease of an
// identity (lease_not_found when there is none).
func (c *Client) InspectIdentity(ctx context.Context, id Identity) (*LeaseAnswer, error) {
	env, a, err := c.do(ctx, call{method: "POST", path: "/v1/leases/inspect",
		body: map[string]any{"lock_identity": id}})
	if err != nil {
		return nil, err
	}
	return leaseAnswer(env, a), nil
}

// Watch: GET /v1/leases/{id}/watch?wait_ms=N, a long poll answered as soon
// as the lease is no longer active, or after wait with the lease still
// active (State "active": ask again). Without a context deadline the call
// is bounded by wait + 5 s.
func (c *Client) Watch(ctx context.Context, leaseID string, wait time.Duration) (*LeaseAnswer, error) {
	env, a, err := c.do(ctx, call{method: "GET",
		path:    "/v1/leases/" + url.PathEscape(leaseID) + "/watch?wait_ms=" + strconv.FormatInt(ms(wait), 10),
		timeout: wait + DefaultTimeout})
	if err != nil {
		return nil, err
	}
	return leaseAnswer(env, a), nil
}

// List: POST /v1/leases/list, one page. Pass NextPageToken back as
// PageToken with the same filter for the next page (or use ListAll).
func (c *Client) List(ctx context.Context, r ListRequest) (*ListAnswer, error) {
	body := map[string]any{"by": r.By}
	for k, v := range map[string]string{"tenant_id": r.TenantID, "program_id": r.ProgramID,
		"target_namespace": r.TargetNamespace, "target_id": r.TargetID, "page_token": r.PageToken} {
		if v != "" {
			body[k] = v
		}
	}
	if r.PageSize > 0 {
		body["page_size"] = r.PageSize
	}
	env, a, err := c.do(ctx, call{method: "POST", path: "/v1/leases/list", body: body})
	if err != nil {
		return nil, err
	}
	return &ListAnswer{Answer: a, Leases: env.Leases, NextPageToken: env.NextPageToken}, nil
}

// ListAll follows next_page_token to the last page.
func (c *Client) ListAll(ctx context.Context, r ListRequest) ([]LeaseRecord, error) {
	var all []LeaseRecord
	for {
		page, err := c.List(ctx, r)
		if err != nil {
			return all, err
		}
		all = append(all, page.Leases...)
		if page.NextPageToken == "" {
			return all, nil
		}
		r.PageToken = page.NextPageToken
	}
}

// Commit: POST /v1/commits, accepted only while that exact lease (id and
// fencing token) is active. ExecutionID is the lease's (LeaseRecord.ExecutionID);
// Lease.Commit fills all of it in.
func (c *Client) Commit(ctx context.Context, r *CommitRequest) (*CommitAnswer, error) {
	if r.RequestID == "" {
		r.RequestID = newID("req_")
	}
	if r.TraceID == "" {
		r.TraceID = newTraceID()
	}
	body := map[string]any{"request_id": r.RequestID, "lock_identity": r.Identity,
		"lease_id": r.LeaseID, "fencing_token": r.FencingToken,
		"execution_id": r.ExecutionID, "trace_id": r.TraceID, "writes": r.Writes}
	env, a, err := c.do(ctx, call{method: "POST", path: "/v1/commits", body: body,
		requestID: r.RequestID, firstSent: &r.firstSent})
	if err != nil {
		return nil, err
	}
	ca := &CommitAnswer{Answer: a}
	if env.Commit != nil {
		ca.LeaseID, ca.FencingToken, ca.Results = env.Commit.LeaseID, env.Commit.FencingToken, env.Commit.Results
	}
	return ca, nil
}
