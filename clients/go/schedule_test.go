package leaseclient

import (
	"testing"
	"time"
)

var t0 = time.Now()

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestScheduleTable30s(t *testing.T) {
	// docs/executor.md's table, 30 s TTL: E = S+30 s, C = S+27 s, R = S+9..11 s
	w := Plan(at(0), 30*time.Second, 0, 0)
	if w.Expiry != at(30000) || w.Cancel != at(27000) || w.Renew != at(10000) {
		t.Fatalf("30 s window: E %v C %v R %v", w.Expiry.Sub(t0), w.Cancel.Sub(t0), w.Renew.Sub(t0))
	}
	if lo, hi := Plan(at(0), 30*time.Second, 0, -1), Plan(at(0), 30*time.Second, 0, 1); lo.Renew != at(9000) || hi.Renew != at(11000) {
		t.Fatalf("jitter bounds: %v %v", lo.Renew.Sub(t0), hi.Renew.Sub(t0))
	}
}

func TestScheduleTable3s(t *testing.T) {
	w := Plan(at(0), 3*time.Second, 0, 0)
	if w.Cancel != at(2700) || w.Renew != at(1000) {
		t.Fatalf("3 s window: C %v R %v", w.Cancel.Sub(t0), w.Renew.Sub(t0))
	}
}

func TestMargin(t *testing.T) {
	cases := []struct{ grant, configured, want time.Duration }{
		{30 * time.Second, 0, 3 * time.Second},
		{3 * time.Second, 0, 300 * time.Millisecond},
		{120 * time.Second, 0, 5 * time.Second}, // clamped to 5 s
		{1500 * time.Millisecond, 0, 150 * time.Millisecond},
		{800 * time.Millisecond, 0, 100 * time.Millisecond}, // the 100 ms floor
		{200 * time.Millisecond, 0, 50 * time.Millisecond},  // never above G/4
		{10 * time.Second, 4 * time.Second, 2500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := Margin(c.grant, c.configured); got != c.want {
			t.Errorf("Margin(%v, %v) = %v, want %v", c.grant, c.configured, got, c.want)
		}
	}
}

func TestRenewNeverAfterHalfWindow(t *testing.T) {
	// for every grant, margin and jitter: S <= R <= S + (C-S)/2 and C < E
	for g := int64(1001); g <= 300000; g += 997 {
		for _, m := range []time.Duration{0, 100 * time.Millisecond, time.Second, time.Hour} {
			for _, j := range []float64{-1, 0, 1} {
				w := Plan(at(0), time.Duration(g)*time.Millisecond, m, j)
				if w.Renew.Before(at(0)) || w.Renew.After(at(0).Add(w.Cancel.Sub(at(0))/2)) || !w.Cancel.Before(w.Expiry) {
					t.Fatalf("G %d margin %v jitter %v: R %v C %v E %v", g, m, j,
						w.Renew.Sub(t0), w.Cancel.Sub(t0), w.Expiry.Sub(t0))
				}
			}
		}
	}
}

func TestAnchor(t *testing.T) {
	// no waited_ms: the first send
	if a := Anchor(at(0), 0, at(2100)); a != at(0) {
		t.Fatalf("absent waited_ms: %v", a.Sub(t0))
	}
	// granted after a 2 000 ms wait, answered at 2 100 ms: S + waited
	if a := Anchor(at(0), 2000, at(2100)); a != at(2000) {
		t.Fatalf("waited 2000: %v", a.Sub(t0))
	}
	// a waited_ms past the answer's arrival is capped by it
	if a := Anchor(at(0), 5000, at(2100)); a != at(2100) {
		t.Fatalf("waited past the answer: %v", a.Sub(t0))
	}
	// the late grant of issue 18: ttl 2000 granted after ~2000 ms. With the
	// anchor the window is whole; without it C lies before the answer.
	with := Plan(Anchor(at(0), 1990, at(2010)), 2*time.Second, 0, 0)
	without := Plan(Anchor(at(0), 0, at(2010)), 2*time.Second, 0, 0)
	if !with.Cancel.After(at(2010).Add(1500*time.Millisecond)) || without.Cancel.After(at(2010)) {
		t.Fatalf("late grant: C with anchor %v, without %v", with.Cancel.Sub(t0), without.Cancel.Sub(t0))
	}
}

func TestAnswerDeadlineAndRetry(t *testing.T) {
	if a := AnswerDeadline(at(10000), at(27000)); a != at(18500) {
		t.Fatalf("A = %v", a.Sub(t0))
	}
	if a := AnswerDeadline(at(28000), at(27000)); a != at(28000) {
		t.Fatalf("A past C = %v", a.Sub(t0))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 1600}
	for i, w := range want {
		if got := RetryDelay(at(0), at(60000), i+1); got != w*time.Millisecond {
			t.Errorf("failure %d: %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := RetryDelay(at(0), at(1000), 5); got != 250*time.Millisecond {
		t.Errorf("quarter of the time left: %v", got)
	}
	if got := RetryDelay(at(0), at(20), 1); got != 10*time.Millisecond {
		t.Errorf("floor: %v", got)
	}
}

func TestGrant(t *testing.T) {
	l := LeaseRecord{RenewedAt: t0, ExpiresAt: t0.Add(30 * time.Second), TTLMS: 30000}
	if Grant(&l) != 30*time.Second || GrantCapped(&l) {
		t.Fatalf("plain grant: %v %v", Grant(&l), GrantCapped(&l))
	}
	l.ExpiresAt = t0.Add(5 * time.Second) // the maximum lifetime cut it
	if Grant(&l) != 5*time.Second || !GrantCapped(&l) {
		t.Fatalf("capped grant: %v %v", Grant(&l), GrantCapped(&l))
	}
	l.ExpiresAt = t0.Add(-time.Second)
	if Grant(&l) != 0 {
		t.Fatalf("negative span: %v", Grant(&l))
	}
}

func TestJitterSpreads(t *testing.T) {
	lo, hi := 1.0, -1.0
	for i := 0; i < 1000; i++ {
		j := jitter()
		if j < -1 || j > 1 {
			t.Fatalf("jitter %v outside [-1, 1]", j)
		}
		if j < lo {
			lo = j
		}
		if j > hi {
			hi = j
		}
	}
	if lo > -0.5 || hi < 0.5 {
		t.Fatalf("1000 draws within [%v, %v]", lo, hi)
	}
}
