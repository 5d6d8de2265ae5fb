package lease_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
)

// TestConcurrentGrantsNeverOversubscribe hammers one Manager with grants
// and releases from many goroutines and checks the budget after every call.
func TestConcurrentGrantsNeverOversubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget, workers = 35, 32
		m := newManager(t, budget, lease.Options{})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range 200 {
					l, err := m.Grant(ctx, lease.Request{Holder: fmt.Sprint("u", w), Cost: 2, Fallback: []int{1}})
					if err != nil {
						var re *lease.RejectedError
						if !errors.As(err, &re) || re.Err != lease.ErrOverCapacity {
							t.Errorf("Grant: %v", err)
						}
						continue
					}
					u, err := usage(m)
					require.NoError(t, err)
					if u.Units > budget {
						t.Errorf("%d units in use, budget %d", u.Units, budget)
					}
					if i%2 == 0 {
						_, err = m.Heartbeat(ctx, l.ID, "")
						require.NoError(t, err)
					}
					_, err = m.Release(ctx, l.ID, "")
					require.NoError(t, err)
				}
			})
		}
		wg.Wait()
		u, err := usage(m)
		require.NoError(t, err)
		assert.Zero(t, u.Units)
		st := m.Stats()
		assert.Equal(t, st.Granted, st.Released)
		assert.Equal(t, uint64(workers*200), st.Granted+st.RejectedOverCapacity)
	})
}
