package leasecheck

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
)

// The proofs every backend runs: several Managers, each on its own store
// instance (its own connections) over the same data, doing random grants,
// heartbeats, releases, reads and sweeps, their calls recorded and the
// history checked against the model. ProveFault does the same while the
// stores' server connections are killed again and again.

var ctx = context.Background()

// proofBudget is small and proofHolders few, so that the budget and the
// holder rule decide often.
const (
	proofBudget  = 6
	proofHolders = 6
)

// newManagers returns one Manager per store, each recording into h under its
// own client id, with TTL and grace far longer than a run (the history
// checker has no server clock), and the background sweep off: the workers
// sweep by hand.
func newManagers(t *testing.T, h *History, stores []lease.Store) []*lease.Manager {
	t.Helper()
	var ms []*lease.Manager
	for i, s := range stores {
		rs := h.Store(i, s)
		m, err := lease.New(proofBudget, lease.Options{
			Store: rs, TTL: 10 * time.Minute, Grace: 10 * time.Minute, SweepInterval: -1, SweepBatch: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		storeOf.Store(m, rs)
		t.Cleanup(func() { _ = m.Close(ctx); storeOf.Delete(m) })
		ms = append(ms, m)
	}
	return ms
}

// storeOf holds the store of each Manager newManagers made (the recorded
// one), for the list of live leases, which is the store's to read.
var storeOf sync.Map // *lease.Manager → lease.Store

// list returns the live leases of m's store.
func list(m *lease.Manager) ([]lease.Lease, error) {
	s, _ := storeOf.Load(m)
	return s.(lease.Store).List(ctx)
}

// workload runs ops random operations on m (seeded by seed). It returns the
// errors that are not rule outcomes, and the leases it was granted and
// neither released nor tried to release with a failed call: they must still
// be there. Every List it sees is checked against the budget and the holder
// rule; with lists false it calls Usage instead.
func workload(t *testing.T, m *lease.Manager, seed uint64, ops int, lists bool) (failed []error, kept []string) {
	r := rand.New(rand.NewPCG(seed, 11))
	var mine []string
	uncertain := map[string]bool{}
	pick := func() string {
		if len(mine) == 0 || r.IntN(10) == 0 {
			return crand.Text()
		}
		return mine[r.IntN(len(mine))]
	}
	for range ops {
		var err error
		switch n := r.IntN(100); {
		case n < 35:
			req := lease.Request{Holder: fmt.Sprint("h", r.IntN(proofHolders)), Cost: 2, Fallback: []int{1}}
			if r.IntN(4) == 0 {
				req = lease.Request{Holder: fmt.Sprint("h", r.IntN(proofHolders)), Cost: 1 + r.IntN(3)}
			}
			var l lease.Lease
			if l, err = m.Grant(ctx, req); err == nil {
				mine = append(mine, l.ID)
			}
		case n < 55:
			_, err = m.Heartbeat(ctx, pick(), "")
		case n < 75:
			id := pick()
			if _, err = m.Release(ctx, id, ""); err != nil {
				uncertain[id] = true
			} else {
				for i, x := range mine {
					if x == id {
						mine = append(mine[:i], mine[i+1:]...)
						break
					}
				}
			}
		case n < 82:
			_, err = m.Get(ctx, pick())
		case n < 88:
			var units int
			if units, _, err = m.Usage(ctx); err == nil && units > proofBudget {
				t.Errorf("Usage %d units > budget %d", units, proofBudget)
			}
		case n < 94 && !lists:
			_, _, err = m.Usage(ctx)
		case n < 94:
			var ls []lease.Lease
			if ls, err = list(m); err == nil {
				leasetest.CheckList(t, ls, proofBudget)
			}
		default:
			_, err = m.Sweep(ctx)
		}
		var re *lease.RejectedError
		if err != nil && !errors.As(err, &re) && !errors.Is(err, lease.ErrNotFound) && !errors.Is(err, lease.ErrExpired) {
			failed = append(failed, err)
		}
	}
	for _, id := range mine {
		if !uncertain[id] {
			kept = append(kept, id)
		}
	}
	return failed, kept
}

// ProveMultiInstance runs workers goroutines over three Managers, one per
// store (each store with its own connections to the same tables), and
// checks the recorded history against the sequential model of the Store
// contract: a linearizable history never oversubscribed the budget nor gave
// a holder two live leases.
func ProveMultiInstance(t *testing.T, stores []lease.Store, workers, ops int) {
	h := New(nil)
	h.Dir = t.TempDir()
	ms := newManagers(t, h, stores)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if errs, _ := workload(t, ms[w%len(ms)], uint64(w), ops, true); len(errs) > 0 {
				t.Errorf("worker %d: %d operations failed with store errors, first: %v", w, len(errs), errs[0])
			}
		})
	}
	wg.Wait()
	var granted, rejected uint64
	for _, m := range ms {
		st := m.Stats()
		granted += st.Granted
		rejected += st.RejectedHolderHasLease + st.RejectedOverCapacity
	}
	if granted == 0 || rejected == 0 {
		t.Errorf("granted %d, rejected %d: the run must grant and exercise the budget and the holder rule", granted, rejected)
	}
	if h.Len() < workers*ops {
		t.Fatalf("%d operations recorded, want at least %d", h.Len(), workers*ops)
	}
	t.Logf("granted %d, rejected %d", granted, rejected)
	h.Check(t, 60*time.Second)
}

// ProveFault runs the multi-instance workload (ops per worker) while kill
// cuts the stores' server connections every interval, then checks: calls failed with
// wrapped store errors that match no lease sentinel, every Manager works
// again without a restart, every acknowledged grant not released is still
// there, and the whole history (failed writes count as ambiguous) is
// linearizable. The workload calls List too, and the final Lists are part
// of the recorded history.
//
// Store errors must start with prefix (the store's package, "sqllease: ").
// calm, if not nil, runs once kill has been called for the last time,
// before the recovery checks: it stops faults the test makes by itself.
func ProveFault(t *testing.T, stores []lease.Store, prefix string, every time.Duration, ops int, kill func() (int, error), calm func()) {
	h := New(nil)
	h.Dir = t.TempDir()
	ms := newManagers(t, h, stores)
	// One lease acknowledged before the faults start, so that the
	// nothing-lost check below never runs empty.
	anchor, err := ms[0].Grant(ctx, lease.Request{Holder: "anchor", Cost: 1})
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var killed atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				n, err := kill()
				if err != nil {
					t.Errorf("kill: %v", err)
					return
				}
				killed.Add(int64(n))
			}
		}
	})
	var (
		mu     sync.Mutex
		failed []error
		kept   []string
		wg     sync.WaitGroup
	)
	for w := range 6 {
		wg.Go(func() {
			errs, ids := workload(t, ms[w%len(ms)], uint64(100+w), ops, true)
			mu.Lock()
			failed = append(failed, errs...)
			kept = append(kept, ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	if calm != nil {
		calm()
	}

	if killed.Load() == 0 {
		t.Fatal("no connection was killed")
	}
	if len(failed) == 0 {
		t.Fatalf("no call failed although %d connections were killed", killed.Load())
	}
	for _, err := range failed {
		var re *lease.RejectedError
		if errors.As(err, &re) || errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrExpired) ||
			errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrClosed) || !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("store error %q matches a lease sentinel or is not wrapped", err)
		}
		if errors.Is(err, lease.ErrNotApplied) == errors.Is(err, lease.ErrUnknownOutcome) {
			t.Errorf("store error %q matches not exactly one of ErrNotApplied and ErrUnknownOutcome", err)
		}
	}
	t.Logf("%d connections killed, %d calls failed, e.g. %v", killed.Load(), len(failed), failed[0])

	// Recovery without restart: the pools replace the dead connections.
	// The first call on a dead idle connection may still fail.
	for i, m := range ms {
		if !eventually(func() bool { _, _, err := m.Usage(ctx); return err == nil }) {
			t.Fatalf("manager %d does not recover", i)
		}
	}
	// Nothing acknowledged was lost (TTL and grace outlast the run).
	for _, id := range append(kept, anchor.ID) {
		if _, err := stores[0].Get(ctx, id); err != nil {
			t.Errorf("acknowledged lease %s: %v", id, err)
		}
	}
	t.Logf("%d acknowledged leases checked", len(kept)+1)

	// Free the budget: release every live lease, the acknowledged ones and
	// any that a grant with a lost reply left, through each Manager in turn.
	var live []lease.Lease
	if !eventually(func() bool { live, err = list(ms[0]); return err == nil }) || len(live) == 0 {
		t.Fatalf("List after the faults: %v, %d leases; the anchor lease at least is live", err, len(live))
	}
	leasetest.CheckList(t, live, proofBudget)
	for i, l := range live {
		if _, err := ms[i%len(ms)].Release(ctx, l.ID, ""); err != nil {
			t.Fatalf("Release of %s after the faults: %v", l.ID, err)
		}
	}
	// With the budget free, every call must succeed on every Manager: a
	// failure here is a Manager that did not recover.
	const rounds = 5
	granted := 0
	for i, m := range ms {
		for range rounds {
			l, err := m.Grant(ctx, lease.Request{Holder: "recovery", Cost: 1})
			if err != nil {
				t.Fatalf("manager %d after recovery: Grant: %v", i, err)
			}
			granted++
			if _, err = m.Heartbeat(ctx, l.ID, ""); err != nil {
				t.Fatalf("manager %d after recovery: Heartbeat: %v", i, err)
			}
			if _, err = m.Release(ctx, l.ID, ""); err != nil {
				t.Fatalf("manager %d after recovery: Release: %v", i, err)
			}
		}
		ls, err := list(m)
		if err != nil || len(ls) != 0 {
			t.Fatalf("manager %d after recovery: List = %d leases, %v; want every lease released", i, len(ls), err)
		}
	}
	if granted != rounds*len(ms) {
		t.Errorf("%d grants after the faults, want %d", granted, rounds*len(ms))
	}
	if h.Len() <= 3*ops { // failed reads are not recorded
		t.Errorf("%d operations recorded, want more than %d", h.Len(), 3*ops)
	}
	h.Check(t, 60*time.Second)
}

// eventually reports whether f returns true within 10 s, polling every
// 20 ms.
func eventually(f func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
