package leaseclient

// Sessions against a server that misbehaves (misbehaving_server_test.go):
// the hold's one keep-alive answered with the wrong shape, a 5xx page, a
// reset or nothing is an unknown outcome, retried until the session's
// cancel point and then every hold of the session is over; a keep-alive
// answered lease_lost ends every hold at once; a service without sessions
// (400 naming session_id) is renewed per lease, and remembered.

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func seenCount(srv *misbehavingServer, pred func(string) bool) int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	n := 0
	for _, s := range srv.seen {
		if pred(s) {
			n++
		}
	}
	return n
}

func isKeepalive(s string) bool { return strings.HasSuffix(s, "/keepalive") }

func holdThree(t *testing.T, c *Client) []*HeldLease {
	t.Helper()
	var out []*HeldLease
	for i := 0; i < 3; i++ {
		id := fakeIdentity()
		id.TargetID = id.TargetID + string(rune('a'+i))
		l, err := c.Hold(ctxFor(t, 5*time.Second), id, HoldOptions{TTL: fakeTTL})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Release() })
		out = append(out, l)
	}
	return out
}

func TestHoldsWhoseKeepalivesMisbehaveAreLostWithinTheTTL(t *testing.T) {
	for _, how := range []string{"slow_head", "reset", "bare_503", "wrong_session_types", "lease_instead_of_session"} {
		how := how
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := newMisbehavingServer(t, func(_, path string) string {
				if strings.HasSuffix(path, "/keepalive") {
					return how
				}
				return ""
			})
			start := time.Now()
			leases := holdThree(t, New(srv.url, "lsk_fake", nil))
			for _, l := range leases {
				select {
				case <-l.Context().Done():
				case <-time.After(fakeHoldBound + 3*time.Second):
				}
				took := time.Since(start)
				var lost *LostError
				if !errors.As(l.Err(), &lost) || lost.Reason != "unconfirmed" || took > fakeHoldBound ||
					!errors.Is(l.Err(), ErrLeaseOutcomeUnknown) {
					t.Fatalf("%s: after %v: %v", how, took, l.Err())
				}
			}
			keeps := seenCount(srv, isKeepalive)
			t.Logf("keep-alives answered %s: %d sent, 3 holds lost after %v: %v", how, keeps,
				time.Since(start).Round(10*time.Millisecond), leases[0].Err())
			if keeps < 1 || seenCount(srv, func(s string) bool { return s == "POST /v1/leases/renew" }) != 0 {
				t.Fatalf("%d keep-alives, or a per-lease renewal", keeps)
			}
			if how != "slow_head" && keeps < 2 {
				t.Fatalf("an unknown outcome was not asked again (%d keep-alives)", keeps)
			}
		})
	}
}

func TestAKeepaliveAnsweredLostLosesEveryHoldAtOnce(t *testing.T) {
	for _, how := range []string{"lease_lost", "session_closed"} {
		how := how
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := newMisbehavingServer(t, func(_, path string) string {
				if strings.HasSuffix(path, "/keepalive") {
					return how
				}
				return ""
			})
			leases := holdThree(t, New(srv.url, "lsk_fake", nil))
			w := leases[0].Window()
			for _, l := range leases {
				select {
				case <-l.Context().Done():
				case <-time.After(fakeHoldBound):
				}
				var lost *LostError
				if !errors.As(l.Err(), &lost) || lost.Reason != "lost" || !errors.Is(l.Err(), ErrLeaseLost) {
					t.Fatalf("%s: %v", how, l.Err())
				}
			}
			at := time.Now()
			keeps := seenCount(srv, isKeepalive)
			t.Logf("keep-alive answered %s: %d keep-alive, every hold lost %v before its cancel point: %v",
				how, keeps, w.Cancel.Sub(at).Round(time.Millisecond), leases[0].Err())
			if keeps != 1 || !at.Before(w.Cancel) {
				t.Fatalf("%d keep-alives, lost at %v (cancel %v)", keeps, at, w.Cancel)
			}
		})
	}
}

func TestAServiceWithoutSessionsIsRenewedPerLease(t *testing.T) {
	for _, where := range []string{"open", "acquire"} {
		where := where
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			srv := newMisbehavingServer(t, func(_, path string) string {
				switch {
				case where == "open" && strings.HasPrefix(path, "/v1/sessions"):
					return "sessions_refused"
				case where == "acquire" && path == "/v1/leases/acquire":
					return "refuse_session_acquire"
				}
				return ""
			})
			c := New(srv.url, "lsk_fake", nil)
			l, err := c.Hold(ctxFor(t, 5*time.Second), fakeIdentity(), HoldOptions{TTL: fakeTTL})
			if err != nil {
				t.Fatal(err)
			}
			// its first renewal (due at a third of the TTL), waited for
			// rather than slept for: a loaded machine may run it late
			for until := time.Now().Add(fakeHoldBound); l.Renewals() < 1 && l.Err() == nil &&
				time.Now().Before(until); {
				time.Sleep(20 * time.Millisecond)
			}
			if l.Err() != nil || l.Renewals() < 1 || l.session != nil {
				t.Fatalf("%v, %d renewals", l.Err(), l.Renewals())
			}
			l.Release()
			l2, err := c.Hold(ctxFor(t, 5*time.Second), fakeIdentity(), HoldOptions{TTL: fakeTTL})
			if err != nil {
				t.Fatal(err)
			}
			l2.Release()
			opens := seenCount(srv, func(s string) bool { return s == "POST /v1/sessions" })
			acquires := seenCount(srv, func(s string) bool { return s == "POST /v1/leases/acquire" })
			want := 2
			if where == "acquire" {
				want = 3
			}
			srv.mu.Lock()
			t.Logf("sessions refused at %s: %v", where, srv.seen)
			srv.mu.Unlock()
			if !c.renewals().sessionsRefused || opens != 1 || acquires != want ||
				seenCount(srv, func(s string) bool { return s == "POST /v1/leases/renew" }) < 1 {
				t.Fatalf("%d opens, %d acquires (want 1, %d), refused %v", opens, acquires, want,
					c.renewals().sessionsRefused)
			}
		})
	}
}

func TestSessionCallsRefuseAnswersOfTheWrongShape(t *testing.T) {
	for _, how := range []string{"wrong_session_types", "lease_instead_of_session", "reset"} {
		how := how
		// each case waits out its calls' deadlines: the cases overlap
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := newMisbehavingServer(t, func(_, _ string) string { return how })
			c := New(srv.url, "lsk_fake", nil)
			open := &SessionOpenRequest{TTL: fakeTTL}
			if _, err := c.SessionOpen(ctxFor(t, fakeCallLimit), open); !errors.Is(err, ErrLeaseOutcomeUnknown) {
				t.Fatalf("%s: open: %v", how, err)
			} else if e := (*Error)(nil); !errors.As(err, &e) || e.RequestID != open.RequestID {
				t.Fatalf("%s: open without its request id: %v", how, err)
			}
			start := time.Now()
			_, err := c.SessionKeepalive(ctxFor(t, fakeCallLimit), "session_fake0001")
			took := time.Since(start)
			t.Logf("session calls answered %s: keep-alive %v after %v", how, err, took.Round(10*time.Millisecond))
			if !errors.Is(err, ErrLeaseOutcomeUnknown) || took > fakeCallBound {
				t.Fatalf("%s: keep-alive: %v after %v", how, err, took)
			}
			if _, err := c.SessionClose(ctxFor(t, fakeCallLimit), &SessionCloseRequest{SessionID: "session_fake0001"}); !errors.Is(err, ErrLeaseOutcomeUnknown) {
				t.Fatalf("%s: close: %v", how, err)
			}
		})
	}
}

func TestASessionKeepaliveSendsNoRequestID(t *testing.T) {
	srv := newMisbehavingServer(t, func(_, _ string) string { return "" })
	got, err := New(srv.url, "lsk_fake", nil).SessionKeepalive(ctxFor(t, fakeCallLimit), "session_fake0001")
	if err != nil || got.Session.SessionID != "session_fake0001" || got.Session.State != "open" {
		t.Fatalf("%+v %v", got, err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.ids) != 0 {
		t.Fatalf("a keep-alive sent request ids %v", srv.ids)
	}
}

func TestARefusedSessionCallIsTheTypedError(t *testing.T) {
	srv := newMisbehavingServer(t, func(_, _ string) string { return "sessions_refused" })
	_, err := New(srv.url, "lsk_fake", nil).SessionOpen(ctxFor(t, fakeCallLimit), &SessionOpenRequest{})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidLeaseRequest || e.Field != "session_id" {
		t.Fatalf("%v", err)
	}
}

// A keep-alive whose outcome is unknown, then a retry that only ran out of
// time before its cancel point: the hold's cause stays the unknown outcome
// (the first may have happened), as a CI run of
// TestHoldsWhoseKeepalivesMisbehaveAreLostWithinTheTTL/lease_instead_of_session
// met under load (its last retry answered deadline_exceeded).
func TestAnUnknownOutcomeStaysTheCauseWhenARetryRunsOutOfTime(t *testing.T) {
	l := &HeldLease{}
	unknown := &Error{Code: CodeLeaseOutcomeUnknown, ClientMade: true, Message: "a success answer without a readable session"}
	late := &Error{Code: CodeDeadlineExceeded, ClientMade: true, Message: "the deadline passed before an answer"}
	l.sessionFailed(unknown)
	l.sessionFailed(late)
	if !errors.Is(l.lastErr, ErrLeaseOutcomeUnknown) || l.failures != 2 {
		t.Fatalf("cause %v after %d failures", l.lastErr, l.failures)
	}
	// any other later failure is the cause: it is news
	other := &Error{Code: CodeLeaseBackendUnavailable, ClientMade: true, Message: "unreachable"}
	l.sessionFailed(other)
	if !errors.Is(l.lastErr, ErrLeaseBackendUnavailable) {
		t.Fatalf("cause %v", l.lastErr)
	}
}
