package leaseclient

// Sessions (issue 37) against a real leased on PostgreSQL: the calls
// (SessionOpen, Acquire with SessionID, SessionKeepalive, SessionClose)
// and holds kept alive by their client's one session, one keep-alive per
// period, observed in leased's own request counters and the leases'
// records.

import (
	"errors"
	"os/exec"
	"testing"
	"time"
)

const sessionTTL = 1500 * time.Millisecond // the policy's minimum is above 1 s

func TestSessionCalls(t *testing.T) {
	t.Parallel() // waits out TTLs (harness_test.go, "Parallel tests")
	s := newSuite(t)
	open := &SessionOpenRequest{TTL: sessionTTL}
	sa, err := s.worker.SessionOpen(ctxFor(t, 5*time.Second), open)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Code != "lease_acquired" || sa.Session.State != "open" || sa.Session.TTLMS != sessionTTL.Milliseconds() {
		t.Fatalf("open: %+v", sa)
	}
	again, err := s.worker.SessionOpen(ctxFor(t, 5*time.Second), open)
	if err != nil || !again.Replayed || again.Session.SessionID != sa.Session.SessionID {
		t.Fatalf("open repeated: %+v %v", again, err)
	}
	sid := sa.Session.SessionID
	a := mustAcquire(t, s.worker, &AcquireRequest{Identity: identity(t), SessionID: sid})
	for i := 0; i < 6; i++ {
		time.Sleep(sessionTTL / 3)
		k, err := s.worker.SessionKeepalive(ctxFor(t, 5*time.Second), sid)
		if err != nil || k.Code != "lease_renewed" || k.Session.SessionID != sid {
			t.Fatalf("keep-alive %d: %+v %v", i, k, err)
		}
	}
	got, err := s.worker.Inspect(ctxFor(t, 5*time.Second), a.Lease.LeaseID)
	if err != nil || got.Lease.State != "active" || !got.Lease.ExpiresAt.After(a.Lease.ExpiresAt) {
		t.Fatalf("kept alive by the session alone: %+v %v", got, err)
	}
	if _, err := s.other.SessionKeepalive(ctxFor(t, 5*time.Second), sid); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("another principal's keep-alive: %v", err)
	}
	c, err := s.worker.SessionClose(ctxFor(t, 5*time.Second), &SessionCloseRequest{SessionID: sid})
	if err != nil || c.Session.State != "closed" || c.LeasesEnded != 1 || c.More {
		t.Fatalf("close: %+v %v", c, err)
	}
	if got, err := s.worker.Inspect(ctxFor(t, 5*time.Second), a.Lease.LeaseID); err != nil || got.Lease.State != "released" {
		t.Fatalf("a lease of a closed session: %+v %v", got, err)
	}
	if _, err := s.worker.SessionKeepalive(ctxFor(t, 5*time.Second), sid); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("keep-alive of a closed session: %v", err)
	}
	if _, err := s.worker.Acquire(ctxFor(t, 5*time.Second), &AcquireRequest{Identity: identity(t), SessionID: sid}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("acquire in a closed session: %v", err)
	}
}

func TestHoldsKeptAliveByOneKeepalivePerPeriod(t *testing.T) {
	t.Parallel() // waits out TTLs (harness_test.go, "Parallel tests")
	s := newSuite(t)
	var leases []*HeldLease
	for i := 0; i < 5; i++ {
		l, err := s.worker.Hold(ctxFor(t, 10*time.Second), identity(t), HoldOptions{TTL: sessionTTL})
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	first := make([]time.Time, len(leases))
	for i, l := range leases {
		first[i] = l.Record().ExpiresAt
	}
	renew0, batch0 := requestsOf(t, s.srv, "renew"), requestsOf(t, s.srv, "renew_batch")
	keep0 := requestsOf(t, s.srv, "session_keepalive")
	time.Sleep(3 * sessionTTL)
	renews := requestsOf(t, s.srv, "renew") - renew0
	batches := requestsOf(t, s.srv, "renew_batch") - batch0
	keeps := requestsOf(t, s.srv, "session_keepalive") - keep0
	g := s.worker.renewals()
	g.mu.Lock()
	confirmed, sid := g.keepalives, g.session.id
	g.mu.Unlock()
	t.Logf("5 holds of ttl %v for %v through one Client: %d keep-alives, %d renewals, %d renew-batches (session %s)",
		sessionTTL, 3*sessionTTL, keeps, renews, batches, sid)
	if renews != 0 || batches != 0 || keeps < 4 || keeps > 19 || confirmed < 4 {
		t.Fatalf("%d keep-alives (%d confirmed), %d renewals, %d batches", keeps, confirmed, renews, batches)
	}
	for i, l := range leases {
		got, err := s.worker.Inspect(ctxFor(t, 5*time.Second), l.ID())
		if l.Err() != nil || l.Renewals() < 4 || err != nil || got.Lease.State != "active" ||
			!got.Lease.ExpiresAt.After(first[i].Add(sessionTTL)) {
			t.Fatalf("hold %d: err %v, %d renewals, %+v %v", i, l.Err(), l.Renewals(), got, err)
		}
	}
	for _, l := range leases {
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if got, err := s.worker.Inspect(ctxFor(t, 5*time.Second), l.ID()); err != nil || got.Lease.State != "released" {
			t.Fatalf("released: %+v %v", got, err)
		}
	}
}

func TestASessionClosedFromOutsideLosesEveryHold(t *testing.T) {
	s := newSuite(t)
	var leases []*HeldLease
	for i := 0; i < 3; i++ {
		l, err := s.worker.Hold(ctxFor(t, 10*time.Second), identity(t), HoldOptions{TTL: sessionTTL})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		leases = append(leases, l)
	}
	g := s.worker.renewals()
	g.mu.Lock()
	sid := g.session.id
	g.mu.Unlock()
	// the same credential, another process: closes the session
	if _, err := New(s.srv.url, s.workerTok, nil).SessionClose(ctxFor(t, 5*time.Second),
		&SessionCloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		select {
		case <-l.Context().Done():
		case <-time.After(sessionTTL + time.Second):
			t.Fatal("a hold outlived its closed session")
		}
		var lost *LostError
		if !errors.As(l.Err(), &lost) || lost.Reason != "lost" {
			t.Fatalf("closed session: %v", l.Err())
		}
		t.Logf("closed session: %v", l.Err())
	}
	l, err := s.worker.Hold(ctxFor(t, 10*time.Second), identity(t), HoldOptions{TTL: sessionTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.session == nil || l.session.id == sid {
		t.Fatalf("the next hold is not in a new session")
	}
}

func TestASessionNotKeptAliveExpiresAndItsHoldsAreLost(t *testing.T) {
	t.Parallel() // waits out TTLs (harness_test.go, "Parallel tests")
	s := newSuite(t)
	ids := []Identity{identity(t), identity(t)}
	var leases []*HeldLease
	for _, id := range ids {
		l, err := s.worker.Hold(ctxFor(t, 10*time.Second), id, HoldOptions{TTL: sessionTTL})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		leases = append(leases, l)
	}
	g := s.worker.renewals()
	g.mu.Lock()
	g.pauseKeepalives = true // frozen: no keep-alive is sent
	g.mu.Unlock()
	for _, l := range leases {
		select {
		case <-l.Context().Done():
		case <-time.After(sessionTTL + time.Second):
			t.Fatal("a hold outlived its session's TTL without a keep-alive")
		}
		var lost *LostError
		if !errors.As(l.Err(), &lost) || lost.Reason != "unconfirmed" {
			t.Fatalf("no keep-alive: %v", l.Err())
		}
		t.Logf("no keep-alive: %v", l.Err())
	}
	time.Sleep(sessionTTL) // past the service's expiry of the session
	for i, l := range leases {
		got, err := s.worker.Inspect(ctxFor(t, 5*time.Second), l.ID())
		if err != nil || got.Lease.State != "expired" {
			t.Fatalf("the service's view: %+v %v", got, err)
		}
		taken := mustAcquire(t, s.other, &AcquireRequest{Identity: ids[i], TTL: sessionTTL})
		if taken.Lease.FencingToken <= l.Token() {
			t.Fatalf("taken over with token %d <= %d", taken.Lease.FencingToken, l.Token())
		}
	}
}

func TestPerLeaseRenewalOptsOut(t *testing.T) {
	t.Parallel() // waits out TTLs (harness_test.go, "Parallel tests")
	s := newSuite(t)
	renew0, open0 := requestsOf(t, s.srv, "renew"), requestsOf(t, s.srv, "session_open")
	l, err := s.worker.Hold(ctxFor(t, 10*time.Second), identity(t), HoldOptions{TTL: sessionTTL, PerLeaseRenewal: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(sessionTTL)
	if l.Renewals() < 1 || l.Err() != nil {
		t.Fatalf("%d renewals, %v", l.Renewals(), l.Err())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if requestsOf(t, s.srv, "renew") == renew0 || requestsOf(t, s.srv, "session_open") != open0 {
		t.Fatal("PerLeaseRenewal: renewals not per lease, or a session opened")
	}
}

// The service ends the session early (its expiry moved to now in the
// database, as a clock jump or an operator would): the client believes it
// alive until its next keep-alive, answered lease_lost, and every hold of
// the session is lost at once.
func TestASessionTheServiceExpiredIsToldByTheKeepalive(t *testing.T) {
	s := newSuite(t)
	var leases []*HeldLease
	for i := 0; i < 3; i++ {
		l, err := s.worker.Hold(ctxFor(t, 10*time.Second), identity(t), HoldOptions{TTL: sessionTTL})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		leases = append(leases, l)
	}
	g := s.worker.renewals()
	g.mu.Lock()
	sid := g.session.id
	g.mu.Unlock()
	out, err := exec.Command("psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", s.db.ownerURL, "-c",
		"UPDATE lease.sessions SET expires_at = now() WHERE session_id = '"+sid+"'").CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v: %s", err, out)
	}
	for _, l := range leases {
		select {
		case <-l.Context().Done():
		case <-time.After(sessionTTL):
			t.Fatal("a hold outlived its expired session")
		}
		var lost *LostError
		if !errors.As(l.Err(), &lost) || lost.Reason != "lost" || !errors.Is(l.Err(), ErrLeaseLost) {
			t.Fatalf("expired session: %v", l.Err())
		}
		t.Logf("session expired by the service: %v", l.Err())
	}
}
