package leasetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ttlkit/ttlkit/lease"
)

func testConcurrentGrants(t *testing.T, e *env) {
	const budget, workers = 10, 30
	stores := e.stores(t)
	var (
		mu     sync.Mutex
		sum    int
		tokens = map[uint64]bool{}
		wg     sync.WaitGroup
	)
	for i := range workers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			l, err := s.Grant(e.ctx, e.args(fmt.Sprint("h", i), budget, 2, 1))
			var re *lease.RejectedError
			switch {
			case err == nil:
				mu.Lock()
				sum += l.Cost
				if tokens[l.Token] {
					t.Errorf("token %d issued twice", l.Token)
				}
				tokens[l.Token] = true
				mu.Unlock()
			case errors.As(err, &re) && re.Err == lease.ErrOverCapacity:
				// Cost 1 did not fit: nothing was left at that moment.
				if re.Available != 0 {
					t.Errorf("OverCapacity with %d available for cost 1", re.Available)
				}
			default:
				t.Errorf("Grant: %v", err)
			}
		})
	}
	wg.Wait()
	// Without releases the budget only fills, and cost 1 was always an
	// option, so the grants fill it exactly.
	if sum != budget {
		t.Errorf("granted %d units with budget %d", sum, budget)
	}
	e.usage(t, sum, len(tokens))
}

func testConcurrentSameHolder(t *testing.T, e *env) {
	const workers = 12
	stores := e.stores(t)
	var (
		mu       sync.Mutex
		winners  []string
		existing []string
		wg       sync.WaitGroup
	)
	for i := range workers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			l, err := s.Grant(e.ctx, e.args("alice", 100, 1))
			var re *lease.RejectedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, l.ID)
			case errors.As(err, &re) && re.Err == lease.ErrHolderHasLease:
				existing = append(existing, re.Existing)
			default:
				t.Errorf("Grant: %v", err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d grants for one holder, want exactly 1", len(winners))
	}
	for _, id := range existing {
		if id != winners[0] {
			t.Errorf("HolderHasLease names %q, want %q", id, winners[0])
		}
	}
	e.usage(t, 1, 1)
}

// testConcurrentMixed runs random-ish grant/heartbeat/release/sweep traffic
// over few holders and a small budget, checking after every Usage and List
// that the budget holds and no holder has two live leases.
func testConcurrentMixed(t *testing.T, e *env) {
	const budget, workers, ops, holders = 5, 6, 40, 4
	stores := e.stores(t)
	var wg sync.WaitGroup
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			var mine []string
			for i := range ops {
				switch (i*7 + w) % 5 {
				case 0, 1:
					a := e.args(fmt.Sprint("h", (i+w)%holders), budget, 2, 1)
					l, err := s.Grant(e.ctx, a)
					var re *lease.RejectedError
					if err == nil {
						mine = append(mine, l.ID)
					} else if !errors.As(err, &re) {
						t.Errorf("Grant: %v", err)
					} else if re.Available < 0 || re.Available > budget {
						t.Errorf("Available %d outside 0..%d", re.Available, budget)
					}
				case 2:
					if len(mine) > 0 {
						if _, err := s.Heartbeat(e.ctx, mine[0], ""); err != nil {
							t.Errorf("Heartbeat of a live lease: %v", err)
						}
					}
				case 3:
					if len(mine) > 0 {
						if _, err := s.Release(e.ctx, mine[0], ""); err != nil {
							t.Errorf("Release of own live lease: %v", err)
						}
						mine = mine[1:]
					}
				case 4:
					if _, err := s.Sweep(e.ctx, 5); err != nil {
						t.Errorf("Sweep: %v", err)
					}
					u, _, err := s.Usage(e.ctx)
					if err != nil {
						t.Errorf("Usage: %v", err)
					} else if u > budget {
						t.Errorf("Usage %d units > budget %d", u, budget)
					}
					ls, err := s.List(e.ctx)
					if err != nil {
						t.Errorf("List: %v", err)
					}
					CheckList(t, ls, budget)
				}
			}
			for _, id := range mine {
				if _, err := s.Release(e.ctx, id, ""); err != nil {
					t.Errorf("final Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	e.usage(t, 0, 0)
}
