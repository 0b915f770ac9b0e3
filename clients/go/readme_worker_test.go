package leaseclient

// The README's worker, frozen past its TTL: a child process (this test
// binary, re-run as the worker) holds a lease with a 2 s TTL, is stopped
// with SIGSTOP for 6 s, continued, and then commits under lease.Context()
// exactly as README.md's "A worker in Go" does. The commit must answer an
// error the worker can tell from its own cancellation: errors.Is
// ErrLeaseLost, a *Error, and still context.Canceled underneath.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeWorkerOutcome is what the child reports on its last line.
type readmeWorkerOutcome struct {
	IsLeaseLost, IsError, IsCanceled, ClientMade bool
	Code, Err, LeaseErr                          string
	LostReason                                   string
}

// TestMain runs this test binary as the README's worker when
// TestReadmeWorkerFrozenPastTTLCommitsUnderLeaseContext starts it so.
func TestMain(m *testing.M) {
	if os.Getenv("LEASECLIENT_README_WORKER") == "1" {
		readmeWorker()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// readmeWorker is README.md's Go worker with a 2 s TTL, reporting what its
// commit answered.
func readmeWorker() {
	var id Identity
	if err := json.Unmarshal([]byte(os.Getenv("LEASECLIENT_README_IDENTITY")), &id); err != nil {
		log.Fatal(err)
	}
	lease, err := FromEnv().Hold(context.Background(), id, HoldOptions{TTL: 2 * time.Second, Wait: 5 * time.Second,
		NoWatch: os.Getenv("LEASECLIENT_README_NOWATCH") == "1"})
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release()
	ctx := lease.Context()
	fmt.Printf("held %s %d\n", lease.ID(), lease.Token())
	// the work: runs until the lease is lost (the parent freezes us)
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
	}
	key := fmt.Sprintf("result/go/%s/%d", id.TargetID, lease.Token())
	_, err = lease.Commit(ctx, Document(key, 0, map[string]any{"ok": true}))
	out := readmeWorkerOutcome{IsLeaseLost: errors.Is(err, ErrLeaseLost),
		IsCanceled: errors.Is(err, context.Canceled)}
	var e *Error
	if errors.As(err, &e) {
		out.IsError, out.Code, out.ClientMade = true, string(e.Code), e.ClientMade
	}
	if err != nil {
		out.Err = err.Error()
	}
	if lease.Err() != nil {
		out.LeaseErr = lease.Err().Error()
	}
	var lost *LostError
	if errors.As(err, &lost) {
		out.LostReason = lost.Reason
	}
	b, _ := json.Marshal(out)
	fmt.Printf("outcome %s\n", b)
}

// As README.md's worker does (with the watch), and with renewals alone
// (NoWatch): whichever notices first, the loss says the lease was lost.
func TestReadmeWorkerFrozenPastTTLCommitsUnderLeaseContext(t *testing.T) {
	t.Parallel() // waits out TTLs (harness_test.go, "Parallel tests")
	s := newSuite(t)
	for _, noWatch := range []string{"0", "1"} {
		t.Run("nowatch="+noWatch, func(t *testing.T) { readmeWorkerFrozen(t, s, noWatch) })
	}
}

func readmeWorkerFrozen(t *testing.T, s *suite, noWatch string) {
	id := identity(t)
	idJSON, _ := json.Marshal(id)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "LEASECLIENT_README_WORKER=1", "LEASE_URL="+s.srv.url,
		"LEASE_TOKEN="+s.workerTok, "LEASECLIENT_README_IDENTITY="+string(idJSON),
		"LEASECLIENT_README_NOWATCH="+noWatch)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(prefix string, within time.Duration) string {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the worker ended before printing %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return strings.TrimPrefix(l, prefix)
				}
			case <-deadline:
				t.Fatalf("no %q from the worker within %v", prefix, within)
			}
		}
	}
	held := next("held ", 20*time.Second)
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// frozen until the service itself answers that the lease expired
	// (inspect: state "expired", past its expires_at; the worker's own local
	// expiry, reckoned from before each call was sent, is earlier), bounded:
	// it must happen within a few TTLs
	leaseID := strings.Fields(held)[0]
	frozen := time.Now()
	var state string
	for {
		got, err := s.worker.Inspect(ctxFor(t, 5*time.Second), leaseID)
		if err != nil {
			t.Fatalf("inspect %s while the worker is frozen: %v", leaseID, err)
		}
		if state = got.Lease.State; state != "active" {
			break
		}
		if time.Since(frozen) > 15*time.Second {
			t.Fatalf("the service did not expire the frozen lease %s within 15 s", leaseID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	frozenFor := time.Since(frozen)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var out readmeWorkerOutcome
	if err := json.Unmarshal([]byte(next("outcome ", 20*time.Second)), &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("held %s; frozen %.1f s under a 2 s TTL, until the service answered %q, then "+
		"lease.Commit(lease.Context()) answered: %+v", held, frozenFor.Seconds(), state, out)
	if state != "expired" {
		t.Fatalf("the service answered %q for the frozen lease, not expired", state)
	}
	if !out.IsLeaseLost || !out.IsError || !out.IsCanceled || out.Code != string(CodeLeaseLost) {
		t.Fatalf("commit under lease.Context() after the loss: errors.Is ErrLeaseLost %v, *Error %v "+
			"(code %q), errors.Is context.Canceled %v: %s", out.IsLeaseLost, out.IsError, out.Code,
			out.IsCanceled, out.Err)
	}
	// frozen past its TTL, leased (up throughout) expired the lease: the
	// loss names that, not an outage
	if out.LostReason != "lost" {
		t.Fatalf("the *LostError behind it says %q: %s", out.LostReason, out.LeaseErr)
	}
}
