package leaseclient

import "time"

// The renewal schedule of docs/executor.md ("The renewal schedule"), as
// pure functions of monotonic times (time.Time values from time.Now carry
// Go's monotonic reading, and Sub uses it). The service's wall-clock
// timestamps are only ever subtracted from each other.

const (
	marginMin         = 100 * time.Millisecond
	marginMax         = 5 * time.Second
	renewFraction     = 3 // R at G/3
	jitterPermille    = 100
	retryFirst        = 100 * time.Millisecond
	retryMax          = 1600 * time.Millisecond
	retryFloor        = 10 * time.Millisecond
	grantSlackForCaps = time.Millisecond
)

// Grant is G: min(ttl_ms, expires_at - renewed_at), never negative (less
// than the TTL near the maximum lifetime).
func Grant(l *LeaseRecord) time.Duration {
	span := l.ExpiresAt.Sub(l.RenewedAt)
	g := span
	if ttl := time.Duration(l.TTLMS) * time.Millisecond; ttl > 0 && ttl < span {
		g = ttl
	}
	if g < 0 {
		return 0
	}
	return g
}

// GrantCapped: the maximum lifetime cut the grant below the TTL, so a
// renewal cannot extend the lease (one millisecond of slack: both
// timestamps are truncated to milliseconds).
func GrantCapped(l *LeaseRecord) bool {
	return l.ExpiresAt.Sub(l.RenewedAt)+grantSlackForCaps < time.Duration(l.TTLMS)*time.Millisecond
}

// Margin is G/10 clamped to [100 ms, 5 s] (or the configured margin when
// > 0), never above G/4.
func Margin(grant, configured time.Duration) time.Duration {
	m := configured
	if m <= 0 {
		m = grant / 10
		if m < marginMin {
			m = marginMin
		}
		if m > marginMax {
			m = marginMax
		}
	}
	if m > grant/4 {
		m = grant / 4
	}
	return m
}

// Anchor is S': the schedule's start for an answer whose request id was
// first sent at firstSent and arrived at answered. waited_ms (the time
// leased held the request before the attempt that granted it began, on the
// service's one clock) moves the start later, never past the answer's
// arrival: min(firstSent + waited, answered). Without waited_ms (0) it is
// the send time, which can only underestimate the service's expiry.
func Anchor(firstSent time.Time, waitedMS int64, answered time.Time) time.Time {
	if waitedMS <= 0 {
		return firstSent
	}
	if waitedMS > int64(24*time.Hour/time.Millisecond) {
		waitedMS = int64(24 * time.Hour / time.Millisecond)
	}
	a := firstSent.Add(time.Duration(waitedMS) * time.Millisecond)
	if !answered.IsZero() && answered.Before(a) {
		return answered
	}
	return a
}

// Window is one confirmed grant's schedule.
type Window struct {
	Start  time.Time     // S' (Anchor)
	Grant  time.Duration // G
	Expiry time.Time     // E = S' + G: the service cannot expire the lease earlier
	Cancel time.Time     // C = E - margin: no confirmed renewal by then means cancel
	Renew  time.Time     // R = S' + G/3 ± 10 %, never after S' + (C - S')/2
}

// Plan computes the window of a grant. jitter in [-1, 1] picks the point
// in the ±10 % spread of the renewal time (rand.Float64()*2-1).
func Plan(start time.Time, grant, margin time.Duration, jitter float64) Window {
	if grant < 0 {
		grant = 0
	}
	w := Window{Start: start, Grant: grant, Expiry: start.Add(grant)}
	w.Cancel = w.Expiry.Add(-Margin(grant, margin))
	interval := grant / renewFraction
	spread := interval * jitterPermille / 1000
	if jitter < -1 {
		jitter = -1
	} else if jitter > 1 {
		jitter = 1
	}
	w.Renew = start.Add(interval + time.Duration(float64(spread)*jitter))
	// leave half the window for the attempt, its retries and a late
	// answer's inspection before the cancel point
	if latest := start.Add(w.Cancel.Sub(start) / 2); w.Renew.After(latest) {
		w.Renew = latest
	}
	if w.Renew.Before(start) {
		w.Renew = start
	}
	return w
}

// AnswerDeadline is A = T + (C - T)/2 for a renewal first sent at T: an
// answer after it grants nothing by itself.
func AnswerDeadline(sent, cancel time.Time) time.Time {
	if !cancel.After(sent) {
		return sent
	}
	return sent.Add(cancel.Sub(sent) / 2)
}

// RetryDelay is the pause before retrying a temporary failure (the
// failures-th in a row): 100 ms doubling to 1.6 s, never more than a
// quarter of the time left before C (at least 10 ms).
func RetryDelay(now, cancel time.Time, failures int) time.Duration {
	d := retryFirst
	for i := 1; i < failures && d < retryMax; i++ {
		d *= 2
	}
	if d > retryMax {
		d = retryMax
	}
	q := cancel.Sub(now) / 4
	if q < retryFloor {
		q = retryFloor
	}
	if d > q {
		d = q
	}
	return d
}
