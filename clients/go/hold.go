package leaseclient

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
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
	NoWatch           bool          // renewals alone find a loss (later)
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

// Lease is a lease held by Hold: renewed in the background, watched for
// loss, cancelled (Context) the moment it cannot be proven held.
type Lease struct {
	client   *Client
	opts     HoldOptions
	ctx      context.Context
	cancel   context.CancelFunc
	stopped  chan struct{} // closed by Release: the goroutines end
	done     sync.WaitGroup
	mu       sync.Mutex
	info     LeaseInfo
	window   Window
	err      error
	renewals int
}

// Hold acquires identity (waiting up to opts.Wait while another holds it),
// then renews it on the schedule of docs/executor.md and watches it (long
// poll) until Release or loss. ctx bounds the acquire only. The returned
// lease's Context() is cancelled the moment the lease is lost; Err() says
// why.
func (c *Client) Hold(ctx context.Context, identity Identity, opts HoldOptions) (*Lease, error) {
	req := &AcquireRequest{Identity: identity, ServiceInstanceID: opts.ServiceInstanceID,
		ExecutionID: opts.ExecutionID, JobID: opts.JobID, TraceID: opts.TraceID, TTL: opts.TTL,
		MaximumLifetime: opts.MaximumLifetime, Wait: opts.Wait, Metadata: opts.Metadata}
	ans, err := c.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	opts.ServiceInstanceID, opts.ExecutionID, opts.TraceID = req.ServiceInstanceID, req.ExecutionID, ans.Lease.TraceID
	l := &Lease{client: c, opts: opts, info: ans.Lease, stopped: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.window = l.plan(Anchor(ans.FirstSent, ans.WaitedMS, ans.Answered), &ans.Lease)
	if !time.Now().Before(l.window.Cancel) {
		// granted with no authority left (an anchor at the send time of a
		// long wait): say so rather than run unfenced
		l.lose(&LostError{Reason: "unconfirmed", Cause: errors.New("granted after its cancel point")})
	}
	l.done.Add(1)
	go l.renewLoop()
	if !opts.NoWatch {
		l.done.Add(1)
		go l.watchLoop()
	}
	return l, nil
}

func (l *Lease) plan(start time.Time, info *LeaseInfo) Window {
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
func (l *Lease) Context() context.Context { return l.ctx }

// Err is nil while the lease is held; then a *LostError (errors.Is
// ErrLeaseLost) or ErrReleased.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Info is the lease as last confirmed by the service.
func (l *Lease) Info() LeaseInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info
}

// Window is the current schedule (for tests and logs).
func (l *Lease) Window() Window {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.window
}

// Renewals counts confirmed renewals.
func (l *Lease) Renewals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

// ID and Token are the lease id and fencing token every fenced write carries.
func (l *Lease) ID() string   { return l.Info().LeaseID }
func (l *Lease) Token() int64 { return l.Info().FencingToken }

// lose ends the lease's authority once: records why and cancels Context.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.cancel()
}

// Commit writes through the fenced commit route with this lease's id and
// token. The service is the judge: after a loss it answers lease_lost.
func (l *Lease) Commit(ctx context.Context, writes ...Write) (*CommitAnswer, error) {
	info := l.Info()
	return l.client.Commit(ctx, &CommitRequest{Identity: info.Identity, LeaseID: info.LeaseID,
		FencingToken: info.FencingToken, ExecutionID: l.opts.ExecutionID, TraceID: l.opts.TraceID,
		Writes: writes})
}

// Release stops renewing and watching and releases the lease (bounded by
// 5 s). Context is cancelled and Err becomes ErrReleased (unless the lease
// was already lost). A lease the service already ended answers lease_lost.
func (l *Lease) Release() error {
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
	l.done.Wait()
	var lost *LostError
	if already != nil && !(errors.As(already, &lost) && (lost.Reason == "unconfirmed" || lost.Reason == "expired")) {
		return already // the service ended it: nothing to release
	}
	// released, or authority lost locally while the service may still hold
	// it: free it for the next holder
	info := l.Info()
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
func (l *Lease) sleepUntil(t time.Time) bool {
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

func (l *Lease) renewLoop() {
	defer l.done.Done()
	for {
		l.mu.Lock()
		w := l.window
		info := l.info
		l.mu.Unlock()
		if GrantCapped(&info) {
			// the maximum lifetime: a renewal cannot extend it
			if l.sleepUntil(w.Cancel) {
				l.lose(&LostError{Reason: "expired"})
			}
			return
		}
		if !l.sleepUntil(w.Renew) {
			return
		}
		next, err := l.renewOnce(w, info)
		if err != nil {
			l.lose(err)
			return
		}
		l.mu.Lock()
		l.window, l.info = next.w, next.info
		l.renewals++
		l.mu.Unlock()
	}
}

type renewed struct {
	w    Window
	info LeaseInfo
}

// renewOnce renews until confirmed or the cancel point C of w.
func (l *Lease) renewOnce(w Window, info LeaseInfo) (renewed, error) {
	ctx, cancel := context.WithDeadline(l.ctx, w.Cancel)
	defer cancel()
	failures := 0
	for {
		req := &OwnerRequest{Identity: info.Identity, LeaseID: info.LeaseID,
			FencingToken: info.FencingToken, ServiceInstanceID: l.opts.ServiceInstanceID,
			TTL: time.Duration(info.TTLMS) * time.Millisecond}
		ans, err := l.client.Renew(ctx, req)
		if l.ctx.Err() != nil {
			return renewed{}, l.Err()
		}
		if err == nil {
			if ans.Answered.After(AnswerDeadline(ans.FirstSent, w.Cancel)) &&
				!l.lateAnswerProven(ctx, ans) {
				return renewed{}, &LostError{Reason: "unconfirmed",
					Cause: errors.New("a late renewal answer could not be proven")}
			}
			return renewed{l.plan(Anchor(ans.FirstSent, ans.WaitedMS, ans.Answered), &ans.Lease), ans.Lease}, nil
		}
		if errors.Is(err, ErrLeaseLost) {
			return renewed{}, &LostError{Reason: "lost", Cause: err}
		}
		if !temporary(err) {
			return renewed{}, &LostError{Reason: "refused", Cause: err}
		}
		failures++
		now := time.Now()
		if !now.Before(w.Cancel) || !l.sleepUntil(now.Add(RetryDelay(now, w.Cancel, failures))) ||
			!time.Now().Before(w.Cancel) {
			if l.ctx.Err() != nil && l.Err() != nil {
				return renewed{}, l.Err()
			}
			return renewed{}, &LostError{Reason: "unconfirmed", Cause: err}
		}
	}
}

// lateAnswerProven: an inspection, answered before C, shows the same
// lease and token, active, with the renewal applied.
func (l *Lease) lateAnswerProven(ctx context.Context, ans *LeaseAnswer) bool {
	got, err := l.client.Inspect(ctx, ans.Lease.LeaseID)
	return err == nil && got.Lease.LeaseID == ans.Lease.LeaseID &&
		got.Lease.FencingToken == ans.Lease.FencingToken && got.Lease.State == "active" &&
		!got.Lease.RenewedAt.Before(ans.Lease.RenewedAt)
}

const watchWait = 30 * time.Second

// watchLoop long-polls the lease: an end it did not ask for cancels at
// once. A failing watch only pauses; renewal stays the authority.
func (l *Lease) watchLoop() {
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
