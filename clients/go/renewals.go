package leaseclient

// One renewal goroutine per Client for every lease held through it
// (issue 20: a fleet's steady load is renewals).
//
// It wakes at the earliest renewal or cancel point of its holds. When one
// is due it renews that hold and every other hold at least half way to its
// own renewal point in one POST /v1/leases/renew-batch (one database
// transaction): renewing early only restarts a window at the batch's send,
// so authority never outlasts what the service granted, and after one
// batch the holds stay in step: one call per period however many leases
// are held.
//
// Each item's answer is judged by its hold (Lease.judge) exactly as a
// renewal of its own. A failure of the whole call that may pass (backend
// unavailable, outcome unknown, rate limited, deadline) is each item's
// temporary failure; a refusal of the whole call (an item out of scope or
// malformed) tells nothing about each lease, so those holds are renewed
// one by one at once; a leased without the route (400 naming "method", or
// 404) one by one from then on. A lone due renewal is a plain
// /v1/leases/renew.
//
// By default the holds acquire their leases in the client's one session
// instead, and this goroutine sends one keep-alive per period for all of
// them (session_keeper.go).

import (
	"context"
	"errors"
	"sync"
	"time"
)

type renewalGroup struct {
	client   *Client
	mu       sync.Mutex
	members  map[*HeldLease]struct{}
	running  bool
	wake     chan struct{} // a hold joined
	oneByOne bool          // the service has no renew-batch route
	batches  int           // renew-batch calls made (tests)
	// the holds' session (session_keeper.go), opened one at a time
	openMu          sync.Mutex
	session         *clientSession
	sessionsRefused bool // the service keeps none: per lease from then on
	keepalives      int  // keep-alives confirmed (tests)
	pauseKeepalives bool // tests: a frozen keep-alive (the session expires)
}

func (c *Client) renewals() *renewalGroup {
	c.groupOnce.Do(func() {
		c.group = &renewalGroup{client: c, members: map[*HeldLease]struct{}{},
			wake: make(chan struct{}, 1)}
	})
	return c.group
}

func (g *renewalGroup) join(l *HeldLease) {
	g.mu.Lock()
	g.members[l] = struct{}{}
	g.kickLocked()
	g.mu.Unlock()
	g.poke()
}

// kickLocked starts the goroutine when none runs (g.mu held).
func (g *renewalGroup) kickLocked() {
	if !g.running {
		g.running = true
		go g.loop()
	}
}

// poke wakes the goroutine to look again.
func (g *renewalGroup) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// leave takes a hold out. A renewal of it in flight is judged by a hold
// whose context has ended, which ignores it.
func (g *renewalGroup) leave(l *HeldLease) {
	g.mu.Lock()
	delete(g.members, l)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

type standing int

const (
	idle standing = iota
	over
	due
	gatherable
)

func (g *renewalGroup) loop() {
	for {
		g.mu.Lock()
		s := g.session
		kept := s != nil && !s.ended && (s.users > 0 || len(g.membersOf(s)) > 0)
		if len(g.members) == 0 && !kept {
			g.running = false
			g.mu.Unlock()
			return
		}
		now := time.Now()
		var overs, dues, gathers []*HeldLease
		next := now.Add(time.Hour)
		for l := range g.members {
			st, at := l.standing(now)
			switch st {
			case over:
				overs = append(overs, l)
			case due:
				dues = append(dues, l)
			case gatherable:
				gathers = append(gathers, l)
			}
			if !at.IsZero() && at.Before(next) {
				next = at
			}
		}
		var keep *clientSession
		if kept {
			switch {
			case !now.Before(s.window.Cancel):
				s.ended = true // unconfirmed: its holds are over at their own points
			case !now.Before(s.nextAt) && !g.pauseKeepalives:
				keep = s
			case g.pauseKeepalives:
				if s.window.Cancel.Before(next) {
					next = s.window.Cancel
				}
			default:
				if s.nextAt.Before(next) {
					next = s.nextAt
				}
			}
		}
		oneByOne := g.oneByOne
		g.mu.Unlock()
		if keep != nil {
			g.keepalive(keep)
		}
		if len(overs) == 0 && len(dues) == 0 {
			if keep != nil {
				continue
			}
			timer := time.NewTimer(time.Until(next))
			select {
			case <-timer.C:
			case <-g.wake:
			}
			timer.Stop()
			continue
		}
		for _, l := range overs {
			l.cancelPoint()
		}
		batch := append(dues, gathers...)
		if len(batch) > BatchMax {
			batch = batch[:BatchMax]
		}
		if len(batch) == 1 || oneByOne {
			for _, l := range batch {
				l.renewSingle()
			}
		} else if len(batch) > 1 {
			g.renewBatch(batch)
		}
	}
}

func (g *renewalGroup) renewBatch(ls []*HeldLease) {
	preps := make([]renewal, len(ls))
	reqs := make([]*OwnerRequest, len(ls))
	cancelAt := time.Time{}
	for i, l := range ls {
		preps[i] = l.prepare()
		reqs[i] = preps[i].req
		if cancelAt.IsZero() || preps[i].w.Cancel.Before(cancelAt) {
			cancelAt = preps[i].w.Cancel
		}
	}
	// one deadline for the call: the nearest cancel point among its items
	ctx, cancel := context.WithDeadline(context.Background(), cancelAt)
	results, err := g.client.RenewMany(ctx, reqs)
	cancel()
	answered := time.Now()
	if err != nil && temporary(err) {
		for i, l := range ls {
			l.judge(preps[i], nil, err, answered)
		}
		return
	}
	if err != nil {
		var e *Error
		if errors.As(err, &e) && (e.HTTPStatus == 404 || e.Field == "method") {
			g.mu.Lock()
			g.oneByOne = true
			g.mu.Unlock()
		}
		for _, l := range ls {
			l.renewSingle()
		}
		return
	}
	g.mu.Lock()
	g.batches++
	g.mu.Unlock()
	for i, l := range ls {
		l.judge(preps[i], results[i].Lease, results[i].Err, answered)
	}
}
