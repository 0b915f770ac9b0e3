package leaseclient

// The session a Client's holds share (docs/clients.md, "Sessions"): the
// renewal goroutine (renewals.go) opens it on the first hold that wants
// one and sends ONE keep-alive per period (G/3 of the session's TTL) for
// every lease in it, instead of renewing each lease. A keep-alive answered
// lease_lost (the session closed, expired, unknown) or refused for good
// ends every hold in it; one that may pass is retried on the renewal
// backoff until the session's cancel point, where each hold is over
// unconfirmed (nothing is reported alive that the service did not
// confirm). A service that keeps no sessions (400 naming session_id) is
// remembered: holds renew per lease from then on.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sessionKey is what holds must ask alike to share a session: the TTL
// they asked (0: the service's default; a lease in a session takes the
// session's TTL) and the service instance it is opened for.
type sessionKey struct {
	ttl      time.Duration
	instance string
}

// clientSession is one session of a Client as this process knows it: its
// last confirmed window (anchored at the first send of the open or
// keep-alive the service confirmed), when the next keep-alive is due, and
// the failures since the last confirmation. Changed under the group's mu.
type clientSession struct {
	id       string
	key      sessionKey
	record   SessionRecord
	window   Window
	nextAt   time.Time
	failures int
	ended    bool // lost, refused, or past its cancel point: never used again
	users    int  // holds acquiring in it now (kept alive meanwhile)
}

// usable: a new lease may be acquired in it without a keep-alive first.
func (s *clientSession) usable(now time.Time) bool {
	return !s.ended && now.Before(s.window.Renew)
}

// refusesSessions: the service keeps no sessions (another backend: 400
// naming session_id; a leased older than the routes: 400 naming method, or
// a proxy's 404).
func refusesSessions(err error) bool {
	var e *Error
	if !errors.As(err, &e) || temporary(err) {
		return false
	}
	return (e.Code == CodeInvalidLeaseRequest && (e.Field == "session_id" || e.Field == "method")) ||
		e.HTTPStatus == 404
}

func (g *renewalGroup) membersOf(s *clientSession) []*HeldLease {
	var out []*HeldLease
	for l := range g.members {
		if l.session == s {
			out = append(out, l)
		}
	}
	return out
}

// sessionFor is a session for a hold to acquire in, kept alive until the
// hold calls sessionDone; nil when the service keeps none (remembered) or
// the session open now is other holds' (another TTL or service instance):
// that hold renews alone. The open's error otherwise.
func (g *renewalGroup) sessionFor(ctx context.Context, key sessionKey) (*clientSession, error) {
	g.openMu.Lock()
	defer g.openMu.Unlock()
	g.mu.Lock()
	if g.sessionsRefused {
		g.mu.Unlock()
		return nil, nil
	}
	s := g.session
	now := time.Now()
	if s != nil && !s.ended && !now.Before(s.window.Cancel) {
		s.ended = true
	}
	if s != nil && s.key != key {
		if !s.ended && (s.users > 0 || len(g.membersOf(s)) > 0) {
			g.mu.Unlock()
			return nil, nil
		}
		s = nil
	}
	if s != nil && s.usable(now) {
		s.users++
		g.kickLocked()
		g.mu.Unlock()
		return s, nil
	}
	g.mu.Unlock()
	if s != nil && !s.ended {
		// idle since its last keep-alive: one now, else a new session
		g.keepalive(s)
		g.mu.Lock()
		if s.usable(time.Now()) {
			s.users++
			g.kickLocked()
			g.mu.Unlock()
			return s, nil
		}
		g.mu.Unlock()
	}
	req := &SessionOpenRequest{ServiceInstanceID: key.instance, TTL: key.ttl}
	ans, err := g.client.SessionOpen(ctx, req)
	if err != nil {
		if refusesSessions(err) {
			g.refused()
			return nil, nil
		}
		return nil, err
	}
	fresh := &clientSession{id: ans.Session.SessionID, key: key, record: ans.Session,
		window: Plan(ans.FirstSent, SessionGrant(&ans.Session), 0, jitter())}
	fresh.nextAt = fresh.window.Renew
	g.mu.Lock()
	if g.session != nil {
		g.session.ended = true
	}
	g.session = fresh
	fresh.users++
	g.kickLocked()
	g.mu.Unlock()
	return fresh, nil
}

// sessionDone: a hold acquiring in s has joined (or given up).
func (g *renewalGroup) sessionDone(s *clientSession) {
	g.mu.Lock()
	s.users--
	g.mu.Unlock()
	g.poke()
}

func (g *renewalGroup) refused() {
	g.mu.Lock()
	g.sessionsRefused = true
	g.mu.Unlock()
}

// sessionLost: the service says s is not open (a keep-alive or an acquire
// in it answered lease_lost, or was refused for good): every hold in it is
// lost; the next hold opens a new session.
func (g *renewalGroup) sessionLost(s *clientSession, cause error) {
	g.mu.Lock()
	s.ended = true
	members := g.membersOf(s)
	g.mu.Unlock()
	for _, l := range members {
		l.lose(&LostError{Reason: "lost", Cause: fmt.Errorf("session %s: %w", s.id, cause)})
	}
}

// keepalive sends one keep-alive of s, bounded by its cancel point, and
// judges it for every hold in it.
func (g *renewalGroup) keepalive(s *clientSession) {
	g.mu.Lock()
	w := s.window
	g.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), w.Cancel)
	ans, err := g.client.SessionKeepalive(ctx, s.id)
	cancel()
	answered := time.Now()
	if err != nil && temporary(err) {
		g.mu.Lock()
		s.failures++
		s.nextAt = answered.Add(RetryDelay(answered, s.window.Cancel, s.failures))
		members := g.membersOf(s)
		g.mu.Unlock()
		for _, l := range members {
			l.sessionFailed(err)
		}
		return
	}
	if err != nil {
		if refusesSessions(err) {
			g.refused()
		}
		g.sessionLost(s, err)
		return
	}
	if ans.Session.SessionID != s.id || ans.Session.State != "open" {
		g.sessionLost(s, &Error{Code: CodeLeaseLost, ClientMade: true,
			Message: "a keep-alive answered session " + ans.Session.SessionID + " " + ans.Session.State})
		return
	}
	// no request id: anchored at its first send, no earlier than the
	// service extended the session
	nw := Plan(ans.FirstSent, SessionGrant(&ans.Session), 0, jitter())
	g.mu.Lock()
	if s.ended || !nw.Expiry.After(s.window.Expiry) {
		g.mu.Unlock()
		return
	}
	s.window, s.record, s.nextAt, s.failures = nw, ans.Session, nw.Renew, 0
	g.keepalives++
	members := g.membersOf(s)
	g.mu.Unlock()
	for _, l := range members {
		l.kept(&ans.Session, ans.FirstSent)
	}
}
