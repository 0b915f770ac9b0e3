package leaseclient

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
)

// HoldOptions configure Hold. Zero values take the service's defaults
// (TTL, maximum lifetime) or the client's (ids, margin).
type HoldOptions struct {
	TTL               time.Duration
	Wait              time.Duration // bounded wait for a held lease (wait_ms)
	MaximumLifetime   time.Duration
	ServiceInstanceID string
	ExecutionID       string
	JobID             string
	TraceID           string
	Metadata          map[string]any
	Margin            time.Duration // 0: G/10 clamped to [100 ms, 5 s]
	NoWatch           bool          // renewals alone find a loss (later); renewed per lease
	// PerLeaseRenewal renews this lease on its own (renew-batch with the
	// client's other such holds) instead of acquiring it in the client's
	// session, kept alive by one keep-alive per period (docs/clients.md,
	// "Sessions"). A hold with NoWatch renews per lease too.
	PerLeaseRenewal bool
}

// ErrReleased is Lease.Err() after Release.
var ErrReleased = errors.New("leaseclient: the lease was released by its holder")

// LostError is why a held lease was cancelled. errors.Is(err,
// ErrLeaseLost) is true for every reason; Cause is the answer or failure
// behind it.
type LostError struct {
	// Reason: "lost" (lease_lost from a renewal, or the watch saw the lease
	// end: State says how), "refused" (a renewal refused for good:
	// invalid_credential, access_denied, ...), "unconfirmed" (no renewal
	// confirmed before the cancel point), "expired" (the maximum lifetime).
	Reason string
	State  string // the watch: "released", "revoked", "expired"
	Cause  error
}

func (e *LostError) Error() string {
	s := "leaseclient: lease " + e.Reason
	if e.State != "" {
		s += " (" + e.State + ")"
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}
func (e *LostError) Unwrap() error        { return e.Cause }
func (e *LostError) Is(target error) bool { return target == ErrLeaseLost }

// HeldLease is a lease held by Hold: renewed in the background, watched
// for loss, cancelled (Context) the moment it cannot be proven held. The
// same thing is HeldLease in the Python client and lease_held_t in C
// (docs/clients.md, "Names").
type HeldLease struct {
	client   *Client
	opts     HoldOptions
	ctx      context.Context
	cancel   context.CancelFunc
	stopped  chan struct{} // closed by Release: the goroutines end
	done     sync.WaitGroup
	mu       sync.Mutex
	record   LeaseRecord
	window   Window
	err      error
	renewals int
	failures int   // temporary renewal failures in a row
	lastErr  error // the last of them: why nothing was confirmed
	// held in a session (nil: renewed alone): its keep-alive moves window,
	// never past lifetime (the maximum lifetime's window from the acquire)
	session  *clientSession
	lifetime *Window
	capped   bool // in a session: the window is the lifetime's
}

// Hold acquires identity (waiting up to opts.Wait while another holds it),
// then renews it on the schedule of docs/executor.md and watches it (long
// poll) until Release or loss. ctx bounds the acquire only. The returned
// lease's Context() is cancelled the moment the lease is lost; Err() says
// why.
func (c *Client) Hold(ctx context.Context, identity Identity, opts HoldOptions) (*HeldLease, error) {
	if opts.ServiceInstanceID == "" {
		opts.ServiceInstanceID = hostInstance()
	}
	// a session's keep-alive says nothing of one lease: a lease ended by
	// force-release or revoke is seen by its watch; without one the hold
	// renews per lease, so that its renewal still tells it
	if opts.PerLeaseRenewal || opts.NoWatch {
		return c.holdIn(ctx, identity, opts, nil)
	}
	g := c.renewals()
	key := sessionKey{ttl: opts.TTL, instance: opts.ServiceInstanceID}
	for attempt := 0; ; attempt++ {
		s, err := g.sessionFor(ctx, key)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return c.holdIn(ctx, identity, opts, nil)
		}
		l, err := c.holdIn(ctx, identity, opts, s)
		g.sessionDone(s)
		var e *Error
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &e) && e.Code == CodeInvalidLeaseRequest && e.Field == "session_id":
			g.refused() // the service keeps no sessions
			return c.holdIn(ctx, identity, opts, nil)
		case errors.Is(err, errSessionGone):
			// the session ended before the acquire reached it (nothing
			// was written): its holds are lost; once more in a new one
			g.sessionLost(s, err)
			if attempt == 0 {
				continue
			}
			var lost *sessionGone
			errors.As(err, &lost)
			return nil, lost.err
		}
		return nil, err
	}
}

// errSessionGone marks an acquire in a session answered lease_lost.
var errSessionGone = errors.New("leaseclient: the session is not open")

type sessionGone struct{ err error }

func (e *sessionGone) Error() string        { return e.err.Error() }
func (e *sessionGone) Unwrap() error        { return e.err }
func (e *sessionGone) Is(target error) bool { return target == errSessionGone }

func (c *Client) holdIn(ctx context.Context, identity Identity, opts HoldOptions, s *clientSession) (*HeldLease, error) {
	req := &AcquireRequest{Identity: identity, ServiceInstanceID: opts.ServiceInstanceID,
		ExecutionID: opts.ExecutionID, JobID: opts.JobID, TraceID: opts.TraceID, TTL: opts.TTL,
		MaximumLifetime: opts.MaximumLifetime, Wait: opts.Wait, Metadata: opts.Metadata}
	if s != nil {
		req.SessionID = s.id
	}
	ans, err := c.Acquire(ctx, req)
	if err != nil {
		if s != nil && errors.Is(err, ErrLeaseLost) {
			return nil, &sessionGone{err}
		}
		return nil, err
	}
	opts.ServiceInstanceID, opts.ExecutionID, opts.TraceID = req.ServiceInstanceID, req.ExecutionID, ans.Lease.TraceID
	l := &HeldLease{client: c, opts: opts, record: ans.Lease, stopped: make(chan struct{})}
	// the context carries the lease, so that a call cut short by its
	// cancellation can say the lease ended (ended.go)
	l.ctx, l.cancel = context.WithCancel(context.WithValue(context.Background(), heldLeaseKey{}, l))
	start := Anchor(ans.FirstSent, ans.WaitedMS, ans.Answered)
	l.window = l.plan(start, &ans.Lease)
	if s != nil {
		l.session = s
		if ans.Lease.MaximumLifetimeMS > 0 {
			lw := Plan(start, time.Duration(ans.Lease.MaximumLifetimeMS)*time.Millisecond, opts.Margin, 0)
			l.lifetime = &lw
			if !lw.Expiry.After(l.window.Expiry) {
				l.window, l.capped = lw, true
			}
		}
	}
	if !time.Now().Before(l.window.Cancel) {
		// granted with no authority left (an anchor at the send time of a
		// long wait): say so rather than run unfenced
		l.lose(&LostError{Reason: "unconfirmed", Cause: errors.New("granted after its cancel point")})
	}
	if l.ctx.Err() == nil {
		l.client.renewals().join(l)
	}
	if !opts.NoWatch {
		l.done.Add(1)
		go l.watchLoop()
	}
	return l, nil
}

func (l *HeldLease) plan(start time.Time, info *LeaseRecord) Window {
	return Plan(start, Grant(info), l.opts.Margin, jitter())
}

// jitter is uniform in [-1, 1] from crypto/rand: Go 1.19's math/rand
// starts every process from the same seed, which would renew a fleet in
// step.
func jitter() float64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0
	}
	return float64(binary.BigEndian.Uint64(b[:])>>11)/float64(1<<53)*2 - 1
}

// Context is cancelled the moment the lease is lost (or released).
func (l *HeldLease) Context() context.Context { return l.ctx }

// Err is nil while the lease is held; then a *LostError (errors.Is
// ErrLeaseLost) or ErrReleased.
func (l *HeldLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Record is the lease as last confirmed by the service.
func (l *HeldLease) Record() LeaseRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.record
}

// Window is the current schedule (for tests and logs).
func (l *HeldLease) Window() Window {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.window
}

// Renewals counts confirmed renewals.
func (l *HeldLease) Renewals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

// ID and Token are the lease id and fencing token every fenced write carries.
func (l *HeldLease) ID() string   { return l.Record().LeaseID }
func (l *HeldLease) Token() int64 { return l.Record().FencingToken }

// lose ends the lease's authority once: records why and cancels Context.
func (l *HeldLease) lose(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.cancel()
	l.client.renewals().leave(l) // nothing left to renew
}

// Commit writes through the fenced commit route with this lease's id and
// token. The service is the judge: after a loss it answers lease_lost.
// Under any context, a commit cut short because the lease ended (ctx is
// lease.Context(), one derived from it, or any context that ended once the
// lease had) answers an *Error matching ErrLeaseLost whose cause unwraps to
// the context's error (context.Canceled). One that may already have been
// sent is repeated once, under DefaultTimeout, to learn what happened: the
// service answers the original result (committed before the loss) or
// lease_lost.
func (l *HeldLease) Commit(ctx context.Context, writes ...Write) (*CommitAnswer, error) {
	info := l.Record()
	req := &CommitRequest{Identity: info.Identity, LeaseID: info.LeaseID,
		FencingToken: info.FencingToken, ExecutionID: l.opts.ExecutionID, TraceID: l.opts.TraceID,
		Writes: writes}
	ans, err := l.client.Commit(ctx, req)
	if err == nil || ctx.Err() == nil {
		return ans, err
	}
	err = l.endedError(ctx, err)
	if !errors.Is(err, ErrLeaseOutcomeUnknown) || !errors.Is(err, ErrLeaseLost) {
		return ans, err
	}
	// sent, then cut short by the loss: the same request id resolves it
	rctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	again, rerr := l.client.Commit(rctx, req)
	var typed *Error
	if rerr == nil {
		return again, nil
	}
	if errors.As(rerr, &typed) && !typed.ClientMade {
		if typed.Err == nil {
			typed.Err = &leaseEnded{end: l.Err(), cause: ctx.Err(), detail: ctx.Err()}
		}
		return nil, typed
	}
	return nil, err
}

// Release stops renewing and watching and releases the lease (bounded by
// 5 s). Context is cancelled and Err becomes ErrReleased (unless the lease
// was already lost). A lease the service already ended answers lease_lost.
func (l *HeldLease) Release() error {
	l.mu.Lock()
	already := l.err
	if l.err == nil {
		l.err = ErrReleased
	}
	l.mu.Unlock()
	select {
	case <-l.stopped:
		return already
	default:
		close(l.stopped)
	}
	l.cancel()
	l.client.renewals().leave(l)
	l.done.Wait()
	var lost *LostError
	if already != nil && !(errors.As(already, &lost) && (lost.Reason == "unconfirmed" || lost.Reason == "expired")) {
		return already // the service ended it: nothing to release
	}
	// released, or authority lost locally while the service may still hold
	// it: free it for the next holder
	info := l.Record()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	_, err := l.client.Release(ctx, &OwnerRequest{Identity: info.Identity, LeaseID: info.LeaseID,
		FencingToken: info.FencingToken, ServiceInstanceID: l.opts.ServiceInstanceID})
	if already != nil {
		return already
	}
	return err
}

// sleepUntil waits for t; false when the lease was released or lost first.
func (l *HeldLease) sleepUntil(t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-l.ctx.Done():
		return false
	}
}

// temporary: failures a renewal retries before the cancel point.
func temporary(err error) bool {
	for _, s := range []error{ErrLeaseBackendUnavailable, ErrLeaseOutcomeUnknown,
		ErrLeaseRateLimited, ErrDeadlineExceeded} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// What the client's renewal goroutine (renewals.go) calls: it renews every
// lease held through one Client, those due in the same period in one
// renew-batch, and each answer is judged here as a renewal of its own.

// standing: whether the lease needs the renewal goroutine now, and when
// next (zero: never again).
func (l *HeldLease) standing(now time.Time) (standing, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return idle, time.Time{}
	}
	w := l.window
	if l.session != nil {
		// the session's keep-alive moves the window, not a renewal
		if !now.Before(w.Cancel) {
			return over, w.Cancel
		}
		return idle, w.Cancel
	}
	// the maximum lifetime: a renewal cannot extend it
	renews := !GrantCapped(&l.record) && !w.Renew.After(w.Cancel)
	next := w.Cancel
	if renews {
		next = w.Renew
	}
	switch {
	case !now.Before(w.Cancel):
		return over, w.Cancel
	case renews && !now.Before(w.Renew):
		return due, next
	// renewing early is always safe (the new window starts at the batch's
	// send); half way keeps a process's renewals in step
	case renews && !now.Before(w.Start.Add(w.Renew.Sub(w.Start)/2)):
		return gatherable, next
	}
	return idle, next
}

// cancelPoint: the cancel point passed without a confirmed renewal.
func (l *HeldLease) cancelPoint() {
	l.mu.Lock()
	capped, cause, w := GrantCapped(&l.record), l.lastErr, l.window
	if l.session != nil {
		capped = l.capped // a record in a session shows the session's expiry
	}
	l.mu.Unlock()
	if capped {
		l.lose(&LostError{Reason: "expired"})
		return
	}
	l.lose(l.unconfirmed(w, cause))
}

// namingInspect bounds the inspection that names what became of a lease
// whose holder looked only after its local expiry: its authority is gone
// by then, so this delays nothing that matters.
const namingInspect = time.Second

// unconfirmed is why a hold's authority ran out unconfirmed. observed is
// the failure its renewals met (nil: none was tried). Without one, or when
// the holder only looks after its local expiry (nothing in the client
// sleeps past the cancel point), the renewals did not run in time: the
// process itself was stopped, frozen or starved, which says nothing about
// leased. Before the local expiry that is "unconfirmed" at once; after it
// leased is asked what became of the lease: "lost" (State its state) when
// it ended it, else "unconfirmed" with what the inspection met.
func (l *HeldLease) unconfirmed(w Window, observed error) *LostError {
	now := time.Now()
	if observed != nil && now.Before(w.Expiry) {
		return &LostError{Reason: "unconfirmed", Cause: observed}
	}
	stalled := fmt.Sprintf("this holder did not run its renewal in time: it looked %.2f s after "+
		"its cancel point (the process was stopped, frozen or starved, or its renewals held up)",
		now.Sub(w.Cancel).Seconds())
	if now.Before(w.Expiry) {
		return &LostError{Reason: "unconfirmed",
			Cause: errors.New(stalled + "; no renewal was sent before the cancel point")}
	}
	info := l.Record()
	ctx, cancel := context.WithTimeout(l.ctx, namingInspect)
	got, err := l.client.Inspect(ctx, info.LeaseID)
	cancel()
	switch {
	case errors.Is(err, ErrLeaseNotFound):
		return &LostError{Reason: "lost", Cause: errors.New(stalled + "; leased no longer knows the lease")}
	case err != nil:
		return &LostError{Reason: "unconfirmed", Cause: fmt.Errorf("%s; leased could not say more: %w", stalled, err)}
	case got.Lease.State != "active" || got.Lease.FencingToken != info.FencingToken:
		return &LostError{Reason: "lost", State: got.Lease.State,
			Cause: errors.New(stalled + "; leased says the lease is " + got.Lease.State)}
	}
	return &LostError{Reason: "unconfirmed",
		Cause: errors.New(stalled + "; leased still shows it active, but no renewal was confirmed in time")}
}

// kept: the session's keep-alive, first sent at firstSent, was
// confirmed. The window starts there with the session's grant, never past
// the maximum lifetime; the record shows what the service would answer
// (the session's expiry, or the lease's own bound when earlier).
func (l *HeldLease) kept(s *SessionRecord, firstSent time.Time) {
	w := Plan(firstSent, SessionGrant(s), l.opts.Margin, jitter())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil || !w.Expiry.After(l.window.Expiry) {
		return
	}
	if l.lifetime != nil && !w.Expiry.Before(l.lifetime.Expiry) {
		w, l.capped = *l.lifetime, true
	}
	l.record.RenewedAt, l.record.ExpiresAt = s.RenewedAt, s.ExpiresAt
	if l.record.MaximumLifetimeMS > 0 {
		own := l.record.AcquiredAt.Add(time.Duration(l.record.MaximumLifetimeMS) * time.Millisecond)
		if own.Before(s.ExpiresAt) {
			l.record.ExpiresAt = own
		}
	}
	l.window = w
	l.renewals++
	l.failures, l.lastErr = 0, nil
}

// sessionFailed: the session's keep-alive failed in a way that may pass
// (retried until the session's cancel point).
func (l *HeldLease) sessionFailed(err error) {
	l.mu.Lock()
	l.failures++
	l.noteFailure(err)
	l.mu.Unlock()
}

// noteFailure records why an attempt confirmed nothing (l.mu held). An
// earlier attempt whose outcome is unknown stays the cause when a later one
// only ran out of time (its deadline passed, often before it was sent):
// what the holder knows is still that the earlier one may have happened.
func (l *HeldLease) noteFailure(err error) {
	if errors.Is(l.lastErr, ErrLeaseOutcomeUnknown) && errors.Is(err, ErrDeadlineExceeded) {
		return
	}
	l.lastErr = err
}

// renewal is one attempt: what was held, its window, and the request.
type renewal struct {
	w   Window
	req *OwnerRequest
}

func (l *HeldLease) prepare() renewal {
	l.mu.Lock()
	defer l.mu.Unlock()
	info := l.record
	return renewal{l.window, &OwnerRequest{Identity: info.Identity, LeaseID: info.LeaseID,
		FencingToken: info.FencingToken, ServiceInstanceID: l.opts.ServiceInstanceID,
		TTL: time.Duration(info.TTLMS) * time.Millisecond}}
}

// renewSingle: one plain renewal (POST /v1/leases/renew), bounded by the
// cancel point and by the hold (Release ends it).
func (l *HeldLease) renewSingle() {
	r := l.prepare()
	ctx, cancel := context.WithDeadline(l.ctx, r.w.Cancel)
	ans, err := l.client.Renew(ctx, r.req)
	cancel()
	l.judge(r, ans, err, time.Now())
}

// judge takes one renewal's answer exactly as a renewal of its own: a
// grant anchored at its request's first send (an answer after its answer
// deadline only when an inspection confirms it), a temporary failure
// retried before the cancel point, anything else ends this hold only.
func (l *HeldLease) judge(r renewal, ans *LeaseAnswer, err error, answered time.Time) {
	if l.ctx.Err() != nil {
		return // released or lost meanwhile
	}
	if err == nil {
		if ans.Lease.LeaseID != r.req.LeaseID || ans.Lease.FencingToken != r.req.FencingToken ||
			ans.Lease.State != "active" {
			l.lose(&LostError{Reason: "lost", Cause: errors.New("a renewal answered another lease")})
			return
		}
		if ans.Answered.After(AnswerDeadline(ans.FirstSent, r.w.Cancel)) {
			ctx, cancel := context.WithDeadline(l.ctx, r.w.Cancel)
			proven := l.lateAnswerProven(ctx, ans)
			cancel()
			if !proven {
				l.lose(l.unconfirmed(r.w, errors.New("a late renewal answer could not be proven")))
				return
			}
		}
		w := l.plan(Anchor(ans.FirstSent, ans.WaitedMS, ans.Answered), &ans.Lease)
		l.mu.Lock()
		if l.ctx.Err() == nil {
			l.window, l.record = w, ans.Lease
			l.renewals++
			l.failures, l.lastErr = 0, nil
		}
		l.mu.Unlock()
		return
	}
	if errors.Is(err, ErrLeaseLost) {
		l.lose(&LostError{Reason: "lost", Cause: err})
		return
	}
	if !temporary(err) {
		l.lose(&LostError{Reason: "refused", Cause: err})
		return
	}
	l.mu.Lock()
	l.failures++
	l.noteFailure(err)
	l.window.Renew = answered.Add(RetryDelay(answered, l.window.Cancel, l.failures))
	l.mu.Unlock()
}

// lateAnswerProven: an inspection, answered before C, shows the same
// lease and token, active, with the renewal applied.
func (l *HeldLease) lateAnswerProven(ctx context.Context, ans *LeaseAnswer) bool {
	got, err := l.client.Inspect(ctx, ans.Lease.LeaseID)
	return err == nil && got.Lease.LeaseID == ans.Lease.LeaseID &&
		got.Lease.FencingToken == ans.Lease.FencingToken && got.Lease.State == "active" &&
		!got.Lease.RenewedAt.Before(ans.Lease.RenewedAt)
}

const watchWait = 30 * time.Second

// watchLoop long-polls the lease: an end it did not ask for cancels at
// once. A failing watch only pauses; renewal stays the authority.
func (l *HeldLease) watchLoop() {
	defer l.done.Done()
	id := l.ID()
	pause := 100 * time.Millisecond
	for l.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(l.ctx, watchWait+DefaultTimeout)
		ans, err := l.client.Watch(ctx, id, watchWait)
		cancel()
		if l.ctx.Err() != nil {
			return
		}
		if err != nil {
			if !l.sleepUntil(time.Now().Add(pause)) {
				return
			}
			if pause *= 2; pause > 5*time.Second {
				pause = 5 * time.Second
			}
			continue
		}
		pause = 100 * time.Millisecond
		if ans.Lease.State != "active" {
			l.lose(&LostError{Reason: "lost", State: ans.Lease.State,
				Cause: &Error{Code: CodeLeaseLost, ClientMade: true,
					Message: "watch: lease " + id + " is " + ans.Lease.State}})
			return
		}
	}
}
