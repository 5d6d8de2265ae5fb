package leasecheck

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// ViewLoad runs clients over ms until stop is closed: each of workers
// goroutines acts for holders of its own, on Manager ms[worker % len(ms)],
// as clients of a lease server do: grant (cost 2 with a fallback to 1, or
// 1), heartbeat every interval or so, now and then release or let a lease
// lapse, and give a lease up at its local deadline. Every acknowledged call
// is recorded in v. It returns the number of calls that failed with a
// store error.
func ViewLoad(ms []*lease.Manager, v *Views, workers, holders int, interval time.Duration, stop <-chan struct{}) int {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
	)
	for w := range workers {
		m := ms[w%len(ms)]
		r := rand.New(rand.NewPCG(uint64(w), 17))
		wg.Go(func() {
			type held struct {
				id       string
				deadline time.Time // local
			}
			mine := map[string]*held{}
			fails := 0
			for {
				select {
				case <-stop:
					mu.Lock()
					failed += fails
					mu.Unlock()
					return
				case <-time.After(time.Duration(r.Int64N(int64(interval)/2)) + interval/4):
				}
				holder := fmt.Sprintf("w%d-h%d", w, r.IntN(holders))
				h := mine[holder]
				if h != nil && !time.Now().Before(h.deadline) {
					delete(mine, holder) // lapsed on the client's clock
					h = nil
				}
				switch n := r.IntN(100); {
				case h == nil && n < 70:
					req := lease.Request{Holder: holder, Cost: 2, Fallback: []int{1}}
					if n < 20 {
						req = lease.Request{Holder: holder, Cost: 1}
					}
					sent := time.Now()
					l, err := m.Grant(ctx, req)
					ack := time.Now()
					if err == nil {
						v.Granted(l, sent, ack)
						mine[holder] = &held{id: l.ID, deadline: sent.Add(max(l.Deadline().Sub(l.HeartbeatAt), 0))}
					} else if storeError(err) {
						fails++
					}
				case h == nil:
				case n < 15:
					// Release: the client stops trusting the lease first.
					v.Lost(h.id, time.Now())
					delete(mine, holder)
					if _, err := m.Release(ctx, h.id, ""); err != nil && storeError(err) {
						fails++
					}
				case n < 20:
					// Abandon it: it lapses by grace.
					v.Lost(h.id, time.Now())
					delete(mine, holder)
				default:
					sent := time.Now()
					hb, err := m.Heartbeat(ctx, h.id, holder)
					switch {
					case err == nil:
						v.Heartbeat(h.id, sent, hb.Remaining)
						if sent.Before(h.deadline) {
							h.deadline = sent.Add(hb.Remaining)
						}
					case storeError(err):
						fails++
					default:
						v.Lost(h.id, time.Now())
						delete(mine, holder)
					}
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// storeError reports whether err is a store failure rather than a rule
// outcome.
func storeError(err error) bool {
	var re *lease.RejectedError
	return !errors.As(err, &re) && !errors.Is(err, lease.ErrNotFound) && !errors.Is(err, lease.ErrExpired) &&
		!errors.Is(err, lease.ErrWrongHolder)
}
