package leaseclient

// The client against a server that misbehaves (a loopback server in this
// test): every exchange is bounded by its context, an answer's size is
// capped at MaxAnswerBytes, wrong JSON types are refused as typed errors
// (an unreadable answer to a mutation is an unknown outcome, never "nothing
// was submitted"), and a reset after the request was sent is an unknown
// outcome resolved by the request id. Bounds are generous (a loaded 2-core
// machine): a hold with a 1.5 s TTL is lost before 3 s (its cancel point is
// 1.35 s), a call with a 1 s deadline ends before 2.5 s. The TTL is short
// because most cases wait until that cancel point: the schedule it gives
// (renewal at ~0.5 s, each attempt's answer due half-way to the cancel
// point, retries from 100 ms) still leaves room for the retries the cases
// count.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	fakeTTL       = 1500 * time.Millisecond
	fakeHoldBound = fakeTTL + 1500*time.Millisecond
	fakeCallLimit = time.Second
	fakeCallBound = 2500 * time.Millisecond
	fakeHugeBytes = 256 << 20
)

type misbehavingServer struct {
	t        *testing.T
	ln       net.Listener
	url      string
	rule     func(method, path string) string
	mu       sync.Mutex
	seen     []string
	ids      []string
	bodySent int64
}

func newMisbehavingServer(t *testing.T, rule func(method, path string) string) *misbehavingServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &misbehavingServer{t: t, ln: ln, url: "http://" + ln.Addr().String(), rule: rule}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func fakeTime(d time.Duration) string {
	return time.Now().Add(d).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func fakeLease(body map[string]any) map[string]any {
	id, _ := body["lease_id"].(string)
	if id == "" {
		id = "lease_fake0001"
	}
	return map[string]any{"lease_id": id, "fencing_token": 7, "state": "active",
		"ttl_ms": fakeTTL.Milliseconds(), "lock_identity": body["lock_identity"],
		"acquired_at": fakeTime(0), "renewed_at": fakeTime(0), "expires_at": fakeTime(fakeTTL),
		"service_instance_id": "fake", "execution_id": "exec_fake", "trace_id": strings.Repeat("0", 32)}
}

// fakeSession is the session of /v1/sessions[/{id}/verb] as leased answers it.
func fakeSession(path string) map[string]any {
	id := "session_fake0001"
	if parts := strings.Split(path, "/"); len(parts) > 3 {
		id = parts[3]
	}
	return map[string]any{"session_id": id, "tenant_id": "tenant-main", "owner_principal_id": "prn_fake",
		"owner_credential_id": "key_fake", "service_instance_id": "fake", "ttl_ms": fakeTTL.Milliseconds(),
		"created_at": fakeTime(0), "renewed_at": fakeTime(0), "expires_at": fakeTime(fakeTTL),
		"state": "open"}
}

func (s *misbehavingServer) serve(c net.Conn) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	var body map[string]any
	raw, _ := io.ReadAll(req.Body)
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.seen = append(s.seen, req.Method+" "+req.URL.Path)
	if id, ok := body["request_id"].(string); ok {
		s.ids = append(s.ids, id)
	}
	s.mu.Unlock()
	send := func(status int, env map[string]any) {
		b, _ := json.Marshal(env)
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
			"Connection: close\r\n\r\n%s", status, len(b), b)
	}
	how := s.rule(req.Method, req.URL.Path)
	if how == "refuse_session_acquire" {
		how = ""
		if _, named := body["session_id"]; named {
			how = "sessions_refused"
		}
	}
	switch how {
	case "slow_head":
		time.Sleep(120 * time.Second)
	case "slow_body":
		b, _ := json.Marshal(map[string]any{"status": "success", "code": "lease_renewed",
			"lease": fakeLease(body)})
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(b))
		for i := range b {
			if _, err := c.Write(b[i : i+1]); err != nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	case "huge", "huge_unframed":
		head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		if s.rule(req.Method, req.URL.Path) == "huge" {
			head += fmt.Sprintf("Content-Length: %d\r\n", fakeHugeBytes)
		}
		io.WriteString(c, head+"\r\n")
		block := append([]byte(`{"status":"success",`), make([]byte, 1<<20)...)
		for left := fakeHugeBytes; left > 0; {
			n := len(block)
			if n > left {
				n = left
			}
			w, err := c.Write(block[:n])
			s.mu.Lock()
			s.bodySent += int64(w)
			s.mu.Unlock()
			if err != nil {
				return
			}
			left -= w
		}
	case "wrong_types":
		l := fakeLease(body)
		l["lease_id"], l["fencing_token"], l["state"], l["expires_at"] = 17, "seven", []string{"active"}, 12
		send(200, map[string]any{"status": "success", "code": "lease_acquired", "lease": l,
			"waited_ms": "none"})
	case "wrong_error_types":
		send(409, map[string]any{"status": "error", "code": "lease_conflict", "msg": []string{"held"},
			"retry_after_ms": "soon", "field": 7})
	case "lease_lost":
		send(409, map[string]any{"status": "error", "code": "lease_lost", "msg": "lease lost",
			"correlation_id": "corr_fake"})
	case "session_closed": // a keep-alive's success naming the session closed
		fs := fakeSession(req.URL.Path)
		fs["state"] = "closed"
		send(200, map[string]any{"status": "success", "code": "lease_renewed", "session": fs})
	case "wrong_session_types":
		fs := fakeSession(req.URL.Path)
		fs["session_id"], fs["ttl_ms"], fs["expires_at"], fs["state"] = 17, "3000", 12, []string{"open"}
		send(200, map[string]any{"status": "success", "code": "lease_renewed", "session": fs})
	case "lease_instead_of_session": // a success with a lease where the session belongs
		send(200, map[string]any{"status": "success", "code": "lease_renewed", "lease": fakeLease(body)})
	case "sessions_refused": // leased on Valkey (src/protocol/store.c)
		send(400, map[string]any{"status": "error", "code": "invalid_lease_request",
			"field": "session_id", "msg": "sessions need the PostgreSQL backend"})
	case "bare_503": // a proxy's page: no typed envelope
		io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\n"+
			"Content-Length: 11\r\nConnection: close\r\n\r\nunavailable")
	case "reset":
		c.(*net.TCPConn).SetLinger(0) // close sends RST, the request read whole
	default: // as leased
		if strings.HasSuffix(req.URL.Path, "/watch") {
			time.Sleep(30 * time.Second)
		}
		code := map[string]string{"acquire": "lease_acquired", "renew": "lease_renewed",
			"release": "lease_released", "sessions": "lease_acquired", "keepalive": "lease_renewed",
			"close": "lease_released"}[req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]]
		if code == "" {
			code = "lease_inspected"
		}
		if strings.HasPrefix(req.URL.Path, "/v1/sessions") {
			send(200, map[string]any{"status": "success", "code": code, "session": fakeSession(req.URL.Path),
				"leases_ended": 0, "more": false})
			return
		}
		send(200, map[string]any{"status": "success", "code": code, "lease": fakeLease(body)})
	}
}

func fakeIdentity() Identity {
	return Identity{TenantID: "tenant-main", ProgramID: "program-a", TargetNamespace: "go-fake",
		TargetID: "t1", ActorName: "usernamegen", WorkflowName: "default"}
}

func TestHoldWhoseRenewalsMisbehaveIsLostWithinItsTTL(t *testing.T) {
	for _, how := range []string{"slow_head", "slow_body", "huge", "huge_unframed", "wrong_types", "reset"} {
		how := how
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := newMisbehavingServer(t, func(_, path string) string {
				if path == "/v1/leases/renew" {
					return how
				}
				return ""
			})
			start := time.Now()
			lease, err := New(srv.url, "lsk_fake", nil).Hold(ctxFor(t, 5*time.Second), fakeIdentity(),
				HoldOptions{TTL: fakeTTL, NoWatch: true})
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release()
			select {
			case <-lease.Context().Done():
			case <-time.After(fakeHoldBound + 3*time.Second):
			}
			took := time.Since(start)
			t.Logf("renewals answered %s: lease.Err() %v after %v", how, lease.Err(), took.Round(10*time.Millisecond))
			var lost *LostError
			if !errors.As(lease.Err(), &lost) || lost.Reason != "unconfirmed" || took > fakeHoldBound {
				t.Fatalf("%s: after %v: %v", how, took, lease.Err())
			}
		})
	}
}

func TestCallIsBoundedByItsContextAsAWhole(t *testing.T) {
	for _, how := range []string{"slow_head", "slow_body"} {
		srv := newMisbehavingServer(t, func(_, _ string) string { return how })
		start := time.Now()
		_, err := New(srv.url, "lsk_fake", nil).Inspect(ctxFor(t, fakeCallLimit), "lease_fake0001")
		took := time.Since(start)
		t.Logf("inspect against %s: %v after %v", how, err, took.Round(10*time.Millisecond))
		var e *Error
		if !errors.As(err, &e) || !e.ClientMade || took > fakeCallBound {
			t.Fatalf("%s: %v after %v", how, err, took)
		}
	}
}

func TestAnswerLargerThanTheCapIsRefused(t *testing.T) {
	for _, how := range []string{"huge", "huge_unframed"} {
		srv := newMisbehavingServer(t, func(_, _ string) string { return how })
		_, err := New(srv.url, "lsk_fake", nil).Inspect(ctxFor(t, 20*time.Second), "lease_fake0001")
		time.Sleep(500 * time.Millisecond) // the server's writes end at the close
		srv.mu.Lock()
		sent := srv.bodySent
		srv.mu.Unlock()
		t.Logf("%s: %d MiB offered, %.1f MiB written before the client closed: %v", how,
			fakeHugeBytes>>20, float64(sent)/(1<<20), err)
		var e *Error
		if !errors.Is(err, ErrLeaseBackendUnavailable) || !errors.As(err, &e) || !e.ClientMade ||
			!strings.Contains(e.Message, "larger than") || sent > MaxAnswerBytes+48<<20 {
			t.Fatalf("%s: %v (%d bytes written)", how, err, sent)
		}
	}
}

func TestWrongTypesAreTypedErrors(t *testing.T) {
	srv := newMisbehavingServer(t, func(_, path string) string {
		if path == "/v1/leases/acquire" {
			return "wrong_types"
		}
		return "wrong_error_types"
	})
	c := New(srv.url, "lsk_fake", nil)
	start := time.Now()
	req := &AcquireRequest{Identity: fakeIdentity()}
	_, err := c.Acquire(ctxFor(t, fakeCallLimit), req)
	took := time.Since(start)
	t.Logf("acquire answered 200 with wrong types: %v after %v", err, took.Round(10*time.Millisecond))
	// it may have happened: an unknown outcome, resolved by the request id
	var e *Error
	if !errors.Is(err, ErrLeaseOutcomeUnknown) || !errors.As(err, &e) || e.RequestID != req.RequestID ||
		took > fakeCallBound {
		t.Fatalf("acquire: %v after %v", err, took)
	}
	_, err = c.Inspect(ctxFor(t, fakeCallLimit), "lease_fake0001")
	t.Logf("inspect answered 409 with wrong types: %v", err)
	if !errors.As(err, &e) || e.HTTPStatus != 409 {
		t.Fatalf("inspect: %v", err)
	}
}

func TestResetAfterTheRequestWasSentIsAnUnknownOutcome(t *testing.T) {
	srv := newMisbehavingServer(t, func(_, _ string) string { return "reset" })
	c := New(srv.url, "lsk_fake", nil)
	start := time.Now()
	req := &CommitRequest{Identity: fakeIdentity(), LeaseID: "lease_fake0001", FencingToken: 7,
		ExecutionID: "exec_fake", Writes: []Write{Document("k", 0, map[string]any{"ok": true})}}
	_, err := c.Commit(ctxFor(t, fakeCallLimit), req)
	took := time.Since(start)
	srv.mu.Lock()
	ids := append([]string(nil), srv.ids...)
	srv.mu.Unlock()
	t.Logf("commit reset after sending: %v after %v, %d sends", err, took.Round(10*time.Millisecond), len(ids))
	var e *Error
	if !errors.Is(err, ErrLeaseOutcomeUnknown) || !errors.As(err, &e) || e.RequestID != req.RequestID ||
		took > fakeCallBound || len(ids) < 2 {
		t.Fatalf("commit: %v after %v, %d sends", err, took, len(ids))
	}
	for _, id := range ids {
		if id != req.RequestID {
			t.Fatalf("a resend with another request id: %s (first %s)", id, req.RequestID)
		}
	}
	if _, err := c.Inspect(ctxFor(t, fakeCallLimit), "lease_fake0001"); !errors.Is(err, ErrLeaseBackendUnavailable) {
		t.Fatalf("inspect reset: %v", err)
	}
}

// A commit under lease.Context() that was sent and is still unanswered when
// the lease is lost: the call is cut short, repeated once with the same
// request id under a fresh context, and answers what the service says
// (here lease_lost), still unwrapping to context.Canceled.
func TestCommitInFlightWhenTheLeaseIsLostIsResolved(t *testing.T) {
	var mu sync.Mutex
	commits := 0
	srv := newMisbehavingServer(t, func(_, path string) string {
		switch path {
		case "/v1/leases/renew":
			return "slow_head"
		case "/v1/commits":
			mu.Lock()
			defer mu.Unlock()
			if commits++; commits == 1 {
				return "slow_head"
			}
			return "lease_lost"
		}
		return ""
	})
	lease, err := New(srv.url, "lsk_fake", nil).Hold(ctxFor(t, 5*time.Second), fakeIdentity(),
		HoldOptions{TTL: fakeTTL, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	start := time.Now()
	_, err = lease.Commit(lease.Context(), Document("k", 0, map[string]any{"ok": true}))
	took := time.Since(start)
	srv.mu.Lock()
	var commitIDs []string
	for i, seen := range srv.seen {
		if seen == "POST /v1/commits" {
			commitIDs = append(commitIDs, srv.ids[i])
		}
	}
	srv.mu.Unlock()
	t.Logf("commit in flight at the loss: %v after %v, sends %v", err, took.Round(10*time.Millisecond), commitIDs)
	var e *Error
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, context.Canceled) || !errors.As(err, &e) ||
		e.ClientMade || e.HTTPStatus != 409 || len(commitIDs) != 2 || commitIDs[0] != commitIDs[1] ||
		took > fakeHoldBound {
		t.Fatalf("commit: %v after %v, sends %v", err, took, commitIDs)
	}
}
