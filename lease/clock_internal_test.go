package lease

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSameClock(t *testing.T) {
	m1, m2 := clock.NewMock(), clock.NewMock()
	assert.True(t, sameClock(clock.New(), clock.New()))
	assert.True(t, sameClock(m1, m1))
	assert.False(t, sameClock(m1, m2))
	assert.False(t, sameClock(clock.New(), m1))
	assert.False(t, sameClock(m1, clock.New()))
}

// A Manager takes a granted lease's send time (KeepAlive's start) from the
// store's CreatedAt only when the memory store reads the Manager's clock.
func TestGrantSendTime(t *testing.T) {
	mc, sc := clock.NewMock(), clock.NewMock()
	sc.Add(time.Hour) // the store's clock runs an hour ahead
	for _, tc := range []struct {
		name  string
		store clock.Clock
	}{{"other clock", sc}, {"same clock", mc}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(10, Options{Store: NewMemoryStore(tc.store), Clock: mc, SweepInterval: -1})
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close(context.Background())) }()
			l, err := m.Grant(context.Background(), Request{Holder: "h", Cost: 1})
			require.NoError(t, err)
			assert.True(t, l.CreatedAt.Equal(tc.store.Now()), "CreatedAt %v", l.CreatedAt)
			assert.True(t, l.sent.Equal(mc.Now()), "sent %v, Manager clock %v", l.sent, mc.Now())
		})
	}
}
