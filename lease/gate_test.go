package lease_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/lease"
)

var _ interface{ Overloaded() bool } = (*hysteresis.Gate)(nil)

// TestHysteresisGate: a camera admission server's CPU rule (trip at 85 %,
// recover below 60 % after 60 s) as the Manager's admission gate.
func TestHysteresisGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := hysteresis.New([]hysteresis.Signal{{Name: "cpu", Warn: 70, Trip: 85, Recover: 60}},
			hysteresis.Options{Hold: 60 * time.Second})
		require.NoError(t, err)
		m := newManager(t, 35, lease.Options{Gate: g, SweepInterval: -1})
		req := lease.Request{Holder: "u", Cost: 2, Fallback: []int{1}}

		require.NoError(t, g.Observe("cpu", 90))
		_, err = m.Grant(ctx, req)
		require.ErrorIs(t, err, lease.ErrOverloaded)

		// Below Recover, but not yet for the whole hold: still refused.
		for range 3 {
			time.Sleep(10 * time.Second)
			require.NoError(t, g.Observe("cpu", 50))
		}
		_, err = m.Grant(ctx, req)
		require.ErrorIs(t, err, lease.ErrOverloaded)
		for range 5 {
			time.Sleep(10 * time.Second)
			require.NoError(t, g.Observe("cpu", 50))
		}
		l, err := m.Grant(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, 2, l.Cost)
		assert.Equal(t, uint64(2), m.Stats().RejectedOverloaded)
	})
}
