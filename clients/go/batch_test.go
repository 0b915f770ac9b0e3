package leaseclient

// Many leases, one call (issue 20): RenewMany and ReleaseMany, and the
// holds of one Client renewed in one renew-batch per period, observed in
// leased's own request counters (GET /metrics).

import (
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// requestsOf is leased_http_requests_total of a route, summed over codes.
func requestsOf(t *testing.T, p *leasedProc, route string) int {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^leased_http_requests_total\{route="` + regexp.QuoteMeta(route) +
		`",[^}]*\} (\d+)`)
	sum := 0
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[1])
		sum += n
	}
	return sum
}

func TestRenewManyAndReleaseMany(t *testing.T) {
	s := newSuite(t)
	var own []*OwnerRequest
	for i := 0; i < 3; i++ {
		id := identity(t)
		a := mustAcquire(t, s.worker, &AcquireRequest{Identity: id, ServiceInstanceID: "inst-b", TTL: 30 * time.Second})
		own = append(own, &OwnerRequest{Identity: id, LeaseID: a.Lease.LeaseID,
			FencingToken: a.Lease.FencingToken, ServiceInstanceID: "inst-b"})
	}
	own[1].FencingToken += 7 // not this holder's: lease_lost, for that item only
	before := requestsOf(t, s.srv, "renew_batch")
	res, err := s.worker.RenewMany(ctxFor(t, 5*time.Second), own)
	if err != nil {
		t.Fatal(err)
	}
	if got := requestsOf(t, s.srv, "renew_batch") - before; got != 1 {
		t.Fatalf("%d renew-batch calls, want 1", got)
	}
	if res[0].Err != nil || res[0].Lease.Code != "lease_renewed" || res[0].Lease.Lease.LeaseID != own[0].LeaseID ||
		!errors.Is(res[1].Err, ErrLeaseLost) || res[2].Err != nil || res[2].Lease.Lease.LeaseID != own[2].LeaseID {
		t.Fatalf("results: %+v %+v %+v", res[0], res[1], res[2])
	}
	// the same values again repeat the same request ids: stored answers
	again, err := s.worker.RenewMany(ctxFor(t, 5*time.Second), own)
	if err != nil || again[0].Err != nil || !again[0].Lease.Replayed {
		t.Fatalf("repeat: %+v %v", again, err)
	}

	for _, r := range own {
		r.RequestID = "" // new releases
	}
	before = requestsOf(t, s.srv, "release_batch")
	rel, err := s.worker.ReleaseMany(ctxFor(t, 5*time.Second), own)
	if err != nil {
		t.Fatal(err)
	}
	if got := requestsOf(t, s.srv, "release_batch") - before; got != 1 {
		t.Fatalf("%d release-batch calls, want 1", got)
	}
	if rel[0].Err != nil || rel[0].Lease.Lease.State != "released" || !errors.Is(rel[1].Err, ErrLeaseLost) ||
		rel[2].Err != nil || rel[2].Lease.Lease.State != "released" {
		t.Fatalf("release results: %+v %+v %+v", rel[0], rel[1], rel[2])
	}
}

func TestHoldsOfOneClientRenewInOneCallPerPeriod(t *testing.T) {
	t.Parallel() // waits out TTLs (harness_test.go, "Parallel tests")
	s := newSuite(t)
	const ttl = 1500 * time.Millisecond
	var holds []*HeldLease
	for i := 0; i < 4; i++ {
		l, err := s.worker.Hold(ctxFor(t, 10*time.Second), identity(t), HoldOptions{TTL: ttl, NoWatch: true})
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, l)
	}
	renew0, batch0 := requestsOf(t, s.srv, "renew"), requestsOf(t, s.srv, "renew_batch")
	time.Sleep(3 * ttl)
	renews := requestsOf(t, s.srv, "renew") - renew0
	batches := requestsOf(t, s.srv, "renew_batch") - batch0
	judged := 0
	for _, l := range holds {
		judged += l.Renewals()
	}
	t.Logf("go client: 4 holds of ttl %v for %v through one Client: %d renew-batch calls, %d single renewals, %d renewals judged",
		ttl, 3*ttl, batches, renews, judged)
	if renews != 0 || batches < 4 || batches > 19 {
		t.Fatalf("%d single renewals and %d batches, want 0 and about one per G/3", renews, batches)
	}
	for _, l := range holds {
		if l.Err() != nil || l.Renewals() < 4 {
			t.Fatalf("hold %s: %v after %d renewals", l.ID(), l.Err(), l.Renewals())
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOneLossInABatchEndsOnlyItsHold(t *testing.T) {
	t.Parallel() // waits out TTLs (harness_test.go, "Parallel tests")
	s := newSuite(t)
	const ttl = 1500 * time.Millisecond
	var holds []*HeldLease
	for i := 0; i < 3; i++ {
		l, err := s.worker.Hold(ctxFor(t, 10*time.Second), identity(t), HoldOptions{TTL: ttl, NoWatch: true})
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, l)
	}
	time.Sleep(ttl / 2)
	info := holds[1].Record()
	if _, err := s.admin.ForceRelease(ctxFor(t, 5*time.Second), &AdminRequest{Identity: info.Identity,
		LeaseID: info.LeaseID, FencingToken: info.FencingToken, Reason: "go batch loss"}); err != nil {
		t.Fatal(err)
	}
	batch0 := requestsOf(t, s.srv, "renew_batch")
	select {
	case <-holds[1].Context().Done():
	case <-time.After(ttl):
		t.Fatal("the force-released hold was not cancelled within its TTL")
	}
	var lost *LostError
	if !errors.As(holds[1].Err(), &lost) || lost.Reason != "lost" {
		t.Fatalf("cause: %v", holds[1].Err())
	}
	if requestsOf(t, s.srv, "renew_batch") <= batch0 {
		t.Fatal("the loss was not told by a renew-batch item")
	}
	time.Sleep(2 * ttl)
	for _, i := range []int{0, 2} {
		if holds[i].Err() != nil {
			t.Fatalf("hold %d: %v", i, holds[i].Err())
		}
		got, err := s.worker.Inspect(ctxFor(t, 5*time.Second), holds[i].ID())
		if err != nil || got.Lease.State != "active" {
			t.Fatalf("hold %d: %+v %v", i, got, err)
		}
		if err := holds[i].Release(); err != nil {
			t.Fatal(err)
		}
	}
	_ = holds[1].Release()
}
