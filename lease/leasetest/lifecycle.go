package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

func testUnknownID(t *testing.T, e *env) {
	e.gone(t, newID(), lease.ErrNotFound)
	e.gone(t, "", lease.ErrNotFound)
}

func testRelease(t *testing.T, e *env) {
	a := e.grant(t, e.args("alice", 2, 2))
	r, err := e.s.Release(e.ctx, a.ID, "")
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	sameLease(t, "Release", r, a)
	e.gone(t, a.ID, lease.ErrNotFound)
	e.usage(t, 0, 0)
	// Units and the holder are free again at once.
	ba := e.args("alice", 2, 2)
	ba.Grace = e.u
	b := e.grant(t, ba)
	if b.Token <= a.Token {
		t.Errorf("token after release %d ≤ %d", b.Token, a.Token)
	}
	// A released lease is never reported by a sweep.
	e.wait(t, 1.5)
	swept, err := e.s.Sweep(e.ctx, 10)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(swept) != 1 || swept[0].ID != b.ID {
		t.Errorf("Sweep = %v, want only %s", ids(swept), b.ID)
	}
}

func testCanceledContext(t *testing.T, e *env) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := e.args("alice", 2, 1)
	notApplied := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, lease.ErrNotApplied) || errors.Is(err, lease.ErrUnknownOutcome) {
			t.Errorf("%s with a context cancelled before the call = %v, want ErrNotApplied only", op, err)
		}
	}
	_, err := e.s.Grant(ctx, a)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Grant with cancelled context = %v, want context.Canceled", err)
	}
	notApplied("Grant", err)
	e.usage(t, 0, 0)
	if _, err := e.s.Get(e.ctx, a.ID); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get after cancelled grant = %v, want ErrNotFound", err)
	}
	l := e.grant(t, e.args("alice", 2, 1))
	_, err = e.s.Heartbeat(ctx, l.ID, "")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Heartbeat with cancelled context = %v, want context.Canceled", err)
	}
	notApplied("Heartbeat", err)
	_, err = e.s.Release(ctx, l.ID, "")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Release with cancelled context = %v, want context.Canceled", err)
	}
	notApplied("Release", err)
	e.usage(t, 1, 1)
}

// testHeartbeat keeps 1.5 units or more of margin wherever a delay could
// make a live lease look expired (a loaded server can stretch the two round
// trips between the heartbeat's stamp and the Get's clock read well past
// half a unit); the expired check errs the safe way.
func testHeartbeat(t *testing.T, e *env) {
	a := e.args("alice", 5, 2)
	a.Grace = 4 * e.u
	l := e.grant(t, a)
	e.wait(t, 2)
	h, err := e.s.Heartbeat(e.ctx, l.ID, "")
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if d := h.HeartbeatAt.Sub(l.HeartbeatAt); d < 2*e.u-tolerance {
		t.Errorf("HeartbeatAt moved by %v, want ≥ %v", d, 2*e.u)
	}
	want := l
	want.HeartbeatAt = h.HeartbeatAt
	sameLease(t, "Heartbeat", h, want) // only HeartbeatAt changed
	// 2.5 units after the heartbeat, 4.5 or more after the grant: past the
	// first heartbeat deadline (4), so only the heartbeat keeps it live.
	e.wait(t, 2.5)
	g, err := e.s.Get(e.ctx, l.ID)
	if err != nil {
		t.Fatalf("Get 2.5 units after heartbeat (grace 4): %v", err)
	}
	sameLease(t, "Get", g, h)
	e.usage(t, 2, 1)
	e.wait(t, 2) // 4.5 units after the heartbeat: expired by grace
	e.gone(t, l.ID, lease.ErrExpired)
	e.gone(t, l.ID, lease.ErrExpired) // still expired: nothing resurrected it
	e.usage(t, 0, 0)
}

func testHeartbeatCapped(t *testing.T, e *env) {
	a := e.args("alice", 5, 1)
	a.TTL, a.Grace = 3*e.u, 3*e.u
	l := e.grant(t, a)
	e.wait(t, 1)
	h, err := e.s.Heartbeat(e.ctx, l.ID, "")
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if !h.ExpiresAt.Equal(l.ExpiresAt) || !h.Deadline().Equal(l.ExpiresAt) {
		t.Errorf("after heartbeat ExpiresAt %v, Deadline %v; want both %v", h.ExpiresAt, h.Deadline(), l.ExpiresAt)
	}
	e.wait(t, 2.5) // 3.5 units: past ExpiresAt, heartbeat deadline (4) not reached
	e.usage(t, 0, 0)
	e.gone(t, l.ID, lease.ErrExpired)
}

func testExpiredAbsent(t *testing.T, e *env) {
	const budget = 2
	a := e.args("alice", budget, 2)
	a.Grace = e.u
	old := e.grant(t, a)
	e.wait(t, 1.5)
	// No sweep has run: the expired lease is absent for reads ...
	e.usage(t, 0, 0)
	if ls := e.list(t); len(ls) != 0 {
		t.Errorf("List = %v, want empty", ids(ls))
	}
	e.gone(t, old.ID, lease.ErrExpired)
	// ... for the holder rule and for the budget.
	fresh := e.grant(t, e.args("alice", budget, 2))
	if ls := e.list(t); len(ls) != 1 || ls[0].ID != fresh.ID {
		t.Errorf("List = %v, want [%s]", ids(ls), fresh.ID)
	}
	swept, err := e.s.Sweep(e.ctx, 10)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(swept) != 1 || swept[0].ID != old.ID {
		t.Fatalf("Sweep = %v, want [%s]", ids(swept), old.ID)
	}
	sameLease(t, "swept lease", swept[0], old)
	e.gone(t, old.ID, lease.ErrNotFound)
	if _, err := e.s.Get(e.ctx, fresh.ID); err != nil {
		t.Errorf("Get(fresh) after sweep: %v", err)
	}
}

func testSweepExactlyOnce(t *testing.T, e *env) {
	const expiring, live, budget = 20, 3, 100
	want := map[string]bool{}
	start := time.Now()
	for i := range expiring {
		a := e.args(fmt.Sprint("gone", i), budget, 1)
		a.Grace = 2 * e.u
		want[e.grant(t, a).ID] = true
	}
	for i := range live {
		e.grant(t, e.args(fmt.Sprint("live", i), budget, 2))
	}
	// Nothing has expired yet, unless the grants themselves took so long
	// on a slow server that the check would race the first deadline.
	if time.Since(start) < e.u {
		if swept, err := e.s.Sweep(e.ctx, 100); err != nil || len(swept) != 0 {
			t.Errorf("Sweep before expiry = %v, %v; want nothing", ids(swept), err)
		}
	}
	e.wait(t, 2.5)
	stores := e.stores(t)
	const sweepers, limit = 4, 3
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		wg   sync.WaitGroup
		errs = make(chan error, sweepers)
	)
	for i := range sweepers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			for {
				ls, err := s.Sweep(e.ctx, limit)
				if err != nil {
					errs <- err
					return
				}
				if len(ls) > limit {
					errs <- fmt.Errorf("Sweep(limit %d) returned %d", limit, len(ls))
				}
				mu.Lock()
				for _, l := range ls {
					got[l.ID]++
				}
				mu.Unlock()
				if len(ls) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Sweep: %v", err)
	}
	for id, n := range got {
		if !want[id] {
			t.Errorf("Sweep returned %s, which was not expired", id)
		} else if n != 1 {
			t.Errorf("Sweep returned %s %d times, want exactly once", id, n)
		}
	}
	for id := range want {
		if got[id] == 0 {
			t.Errorf("expired lease %s never returned by Sweep", id)
		}
	}
	e.usage(t, 2*live, live)
	if swept, err := e.s.Sweep(e.ctx, 100); err != nil || len(swept) != 0 {
		t.Errorf("Sweep after sweep = %v, %v; want nothing", ids(swept), err)
	}
}
