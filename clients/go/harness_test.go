package leaseclient

// The integration tests' harness: real leased processes on free loopback
// ports over the database tests/clients/with_database made, credentials
// made with leasectl, the way tests/harness/leased_proc.c does for the C
// tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

type testDB struct {
	ownerURL, leased, leasectl, serviceURL string
}

// database is the suite's database; without LEASE_TEST_* (go test outside
// ctest) integration tests fail, or skip under -short.
func database(t *testing.T) testDB {
	t.Helper()
	db := testDB{os.Getenv("LEASE_TEST_DB_URL"), os.Getenv("LEASE_TEST_LEASED"),
		os.Getenv("LEASE_TEST_LEASECTL"), os.Getenv("LEASE_TEST_SERVICE_DB_URL")}
	if db.ownerURL == "" || db.leased == "" || db.leasectl == "" || db.serviceURL == "" {
		if testing.Short() {
			t.Skip("integration test: run through tests/clients/with_database (ctest -R go_client)")
		}
		t.Fatal("LEASE_TEST_DB_URL, LEASE_TEST_SERVICE_DB_URL, LEASE_TEST_LEASED and " +
			"LEASE_TEST_LEASECTL are not set: run through tests/clients/with_database " +
			"(ctest -R go_client), or go test -short for the unit tests alone")
	}
	return db
}

// storeSetting is leased's store setting for url: LEASE_STORE_URL for a
// redis:// or valkey:// URL (tests/clients/with_database with
// LEASE_TEST_STORE=valkey; docs/config.md), else LEASE_DATABASE_URL.
func storeSetting(url string) string {
	if strings.HasPrefix(url, "redis://") || strings.HasPrefix(url, "valkey://") {
		return "LEASE_STORE_URL=" + url
	}
	return "LEASE_DATABASE_URL=" + url
}

type leasedProc struct {
	t     *testing.T
	db    testDB
	extra []string
	port  int
	url   string
	log   string
	cmd   *exec.Cmd
	done  chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startLeased starts a leased (extra: more LEASE_* settings) and waits for
// /readyz; it is stopped when the test ends.
func startLeased(t *testing.T, db testDB, extra ...string) *leasedProc {
	t.Helper()
	p := &leasedProc{t: t, db: db, extra: extra, port: freePort(t)}
	p.url = fmt.Sprintf("http://127.0.0.1:%d", p.port)
	p.log = filepath.Join(t.TempDir(), "leased.log")
	p.start()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				tail := string(b)
				if len(tail) > 4000 {
					tail = tail[len(tail)-4000:]
				}
				t.Logf("leased on port %d, end of its log:\n%s", p.port, tail)
			}
		}
	})
	return p
}

// start runs leased on p.port (again after a kill: the same URL).
func (p *leasedProc) start() {
	t := p.t
	t.Helper()
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LEASE_") {
			env = append(env, e)
		}
	}
	env = append(env, storeSetting(p.db.serviceURL),
		fmt.Sprintf("LEASE_LISTEN=127.0.0.1:%d", p.port), "LEASE_LOG_LEVEL=info",
		"LEASE_HEALTH_INTERVAL_MS=200")
	env = append(env, p.extra...)
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(p.db.leased)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start leased: %v", err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(p.cmd, p.done)
	end := time.Now().Add(30 * time.Second)
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	for {
		resp, err := probe.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("leased on port %d exited before it was ready", p.port)
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("leased on port %d not ready within 30 s", p.port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 kills leased at once (no shutdown: answers in flight are lost).
func (p *leasedProc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *leasedProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// credential makes a credential with leasectl and returns its token.
func credential(t *testing.T, db testDB, principal, program string, admin bool, caps ...string) string {
	t.Helper()
	args := []string{"credential", "create", "--database-url", db.ownerURL, "--principal", principal,
		"--client", "cl_" + principal, "--tenant", "tenant-main", "--program", program, "--actor", "*"}
	for _, c := range caps {
		args = append(args, "--capability", c)
	}
	if admin {
		args = append(args, "--admin")
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(db.leasectl, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("leasectl credential create: %v: %s", err, errb.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		var v struct {
			Token string `json:"token"`
		}
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &v) == nil && v.Token != "" {
			return v.Token
		}
	}
	t.Fatalf("leasectl credential create printed no token: %s", out.String())
	return ""
}

// suite is what most tests need: one leased and three credentials.
type suite struct {
	db                   testDB
	srv                  *leasedProc
	worker, other, admin *Client
	workerTok, adminTok  string
}

// Parallel tests: a test that mostly waits out TTLs (holds kept alive for
// several TTLs, a lease or session left to expire, a waited acquire) calls
// t.Parallel(), so that these waits overlap instead of adding up. Each has
// its own leased, credentials and targets (newSuite, identity), so none sees
// another's leases or request counters; the tests that assert how soon
// something happens beyond a TTL's own bounds (force-release seen within
// 1 s, kill -9 and restart) stay serial, and go test runs every serial test
// before the parallel ones start.
var principalSeq atomic.Int64

func newSuite(t *testing.T, extra ...string) *suite {
	t.Helper()
	db := database(t)
	s := &suite{db: db, srv: startLeased(t, db, extra...)}
	tag := fmt.Sprintf("%d_%d", os.Getpid(), principalSeq.Add(1))
	s.workerTok = credential(t, db, "prn_w_"+tag, "program-a", false, "targets:lease", "targets:read")
	otherTok := credential(t, db, "prn_o_"+tag, "program-a", false, "targets:lease", "targets:read")
	s.adminTok = credential(t, db, "prn_a_"+tag, "*", true, "targets:lease", "targets:read",
		"targets:force-release", "targets:revoke", "audit:read")
	s.worker = New(s.srv.url, s.workerTok, nil)
	s.other = New(s.srv.url, otherTok, nil)
	s.admin = New(s.srv.url, s.adminTok, nil)
	return s
}

var targetSeq atomic.Int64

// identity is a fresh identity of program-a (each test its own targets).
func identity(t *testing.T) Identity {
	return Identity{TenantID: "tenant-main", ProgramID: "program-a", TargetNamespace: "go-client",
		TargetID:  fmt.Sprintf("t%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1000000, targetSeq.Add(1)),
		ActorName: "usernamegen", WorkflowName: "default"}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
