package expiry_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
)

// val carries the deadline it was stored with, so readers can check that
// no expired value is ever returned.
type val struct {
	key      string
	deadline time.Time // zero: none
}

// TestConcurrentUse runs Set (with and without a deadline)/Get/Delete/
// Deadline/Expire/Range/Stats/Clear and active expiry (background and by
// hand) at once, in real time with TTLs of a few milliseconds; run it under
// -race. Expire that removes a deadline or extends one runs on keys of their
// own, whose values carry no deadline: they
// make a value outlive the deadline it was stored with, which is how the
// test catches an expired value being returned for the other keys.
func TestConcurrentUse(t *testing.T) {
	var events atomic.Int64
	m, err := expiry.NewMap(expiry.MapOptions[string, val]{Options: expiry.Options{Interval: time.Millisecond}, Shards: 4,
		OnEvent: func(expiry.Event[string, val]) { events.Add(1) }})
	require.NoError(t, err)
	defer m.Close(context.Background())

	keys, pkeys := make([]string, 64), make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	for i := range pkeys {
		pkeys[i] = fmt.Sprint("p", i)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	check := func(k string, v val, before time.Time) {
		if v.key != k {
			t.Errorf("key %q returned the value of %q", k, v.key)
		}
		if !v.deadline.IsZero() && !v.deadline.After(before) {
			t.Errorf("key %q returned %v after its deadline %v", k, before, v.deadline)
		}
	}
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[r.IntN(len(keys))]
				pk := pkeys[r.IntN(len(pkeys))]
				ms := time.Duration(1+r.IntN(3)) * time.Millisecond
				switch r.IntN(12) {
				case 10:
					if err := m.SetWithTTL(pk, val{key: pk}, ms); err != nil {
						t.Error(err)
					}
				case 11:
					if r.IntN(2) == 0 {
						persist(m, pk)
					} else {
						expireIn(m, pk, ms)
					}
					if v, ok := m.Get(pk); ok {
						check(pk, v, time.Now())
					}
				case 0:
					m.Set(k, val{key: k}, time.Time{})
				case 1, 2:
					at := time.Now().Add(time.Duration(r.IntN(3000)) * time.Microsecond)
					m.Set(k, val{key: k, deadline: at}, at)
				case 3:
					m.Delete(k)
				case 4:
					if ttlOf(m, k) < missing {
						t.Errorf("TTL below -2")
					}
				case 5:
					// A deadline in the past deletes; values stay checkable.
					expireAt(m, k, time.Now())
				case 6:
					if r.IntN(100) == 0 {
						m.Cycle(context.Background())
					}
				default:
					before := time.Now()
					if v, ok := m.Get(k); ok {
						check(k, v, before)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			before := time.Now()
			m.Range(func(k string, v val) bool { check(k, v, before); return true })
			_ = m.Stats()
			if rand.IntN(50) == 0 {
				m.Clear()
			}
		}
	})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	// Close stops active expiry, so Stats and Len below read a keyspace
	// that no longer changes, and delivers the queued events.
	require.NoError(t, m.Close(context.Background()))
	st := m.Stats()
	assert.Equal(t, m.Len(), st.Keys)
	assert.LessOrEqual(t, st.KeysWithDeadline, st.Keys)
	assert.Positive(t, st.ExpiredActive)
	assert.Positive(t, st.ExpiredPassive)
	assert.Positive(t, st.Cycles)
	assert.Equal(t, int64(st.EventsDelivered), events.Load())
	assert.Positive(t, events.Load())
}
