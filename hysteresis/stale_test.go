package hysteresis_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis"
)

func TestStaleSignalWarnsByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{Hold: -1}, cpu) // StaleAfter 1 min, StaleWarn
		observe(t, g, "cpu", 10)
		last := time.Now()
		time.Sleep(time.Minute)
		assert.Equal(t, hysteresis.Normal, g.State(), "exactly StaleAfter old is still fresh")
		time.Sleep(time.Nanosecond)
		assert.Equal(t, hysteresis.Warning, g.State(), "a stale signal must not keep the gate Normal")
		time.Sleep(time.Second)
		assert.False(t, g.Overloaded(), "StaleWarn keeps admission open")
		assert.Equal(t, last.Add(time.Minute), g.Stats().Since, "went stale when it fell due")
		st := g.Stats()
		assert.Equal(t, 1, st.Stale)
		assert.Equal(t, 0, st.Missing)
		assert.EqualValues(t, 1, st.StaleEvents)
		assert.True(t, g.Last()[0].Stale)

		observe(t, g, "cpu", 10)
		assert.Equal(t, hysteresis.Normal, g.State(), "a fresh calm sample ends the warning")
		assert.Equal(t, []string{"normal>warning:stale", "warning>normal:calm"}, rec.transitions())
		assert.Equal(t, "cpu", rec.get()[0].Signal)
		assert.Equal(t, 0, g.Stats().Stale)
		assert.EqualValues(t, 1, g.Stats().StaleEvents, "one stale period counts once")
	})
}

func TestMissingSignalIsStaleAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{StaleAfter: 10 * time.Second, Hold: -1}, cpu, mem)
		for range 10 {
			observe(t, g, "cpu", 10)
			time.Sleep(time.Second)
		}
		observe(t, g, "cpu", 10)
		assert.Equal(t, hysteresis.Normal, g.State(), "within the grace a missing signal is only counted")
		st := g.Stats()
		assert.Equal(t, 1, st.Missing)
		assert.Equal(t, 0, st.Stale)

		time.Sleep(time.Second)
		observe(t, g, "cpu", 10)
		assert.Equal(t, hysteresis.Warning, g.State())
		st = g.Stats()
		assert.Equal(t, 1, st.Missing)
		assert.Equal(t, 1, st.Stale)
		assert.Equal(t, []string{"normal>warning:stale"}, rec.transitions())
		assert.Equal(t, "memory", rec.get()[0].Signal)
	})
}

func TestMissingSignalBlocksRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, hysteresis.Options{Hold: 10 * time.Second, StaleAfter: time.Hour}, cpu, mem)
		observe(t, g, "cpu", 99)
		for range 100 {
			time.Sleep(time.Second)
			observe(t, g, "cpu", 1)
		}
		assert.True(t, g.Overloaded(), "memory was never observed, so it was never calm")
		observe(t, g, "memory", 1)
		time.Sleep(10 * time.Second)
		assert.False(t, g.Overloaded())
	})
}

func TestStaleTripFailsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{Hold: 30 * time.Second, StaleAfter: 5 * time.Second, Stale: hysteresis.StaleTrip}, cpu)
		observe(t, g, "cpu", 10)
		time.Sleep(6 * time.Second)
		assert.True(t, g.Overloaded())
		// A fresh sample does not reopen at once: the hold applies.
		observe(t, g, "cpu", 10)
		assert.True(t, g.Overloaded())
		for range 6 {
			time.Sleep(5 * time.Second)
			observe(t, g, "cpu", 10)
		}
		assert.False(t, g.Overloaded())
		assert.Equal(t, []string{"normal>overloaded:stale", "overloaded>normal:recovered"}, rec.transitions())
	})
}

func TestStaleKeepHoldsStateButBlocksRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := hysteresis.Options{StaleAfter: 5 * time.Second, Stale: hysteresis.StaleKeep, Hold: -1}
		g, rec := newGate(t, opts, cpu)
		observe(t, g, "cpu", 10)
		time.Sleep(time.Minute)
		assert.Equal(t, hysteresis.Normal, g.State(), "StaleKeep keeps the last value")
		assert.Equal(t, 1, g.Stats().Stale, "but counts the stale signal")
		assert.Empty(t, rec.get())

		observe(t, g, "cpu", 90)
		observe(t, g, "cpu", 10)
		assert.False(t, g.Overloaded(), "Hold 0: a fresh calm sample recovers at once")
		observe(t, g, "cpu", 90)
		time.Sleep(time.Minute)
		assert.True(t, g.Overloaded(), "the last value is at Trip")
	})
}

func TestStaleDuringHoldRestartsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, hysteresis.Options{Hold: time.Minute, StaleAfter: 10 * time.Second}, cpu)
		observe(t, g, "cpu", 90)
		observe(t, g, "cpu", 10)
		time.Sleep(30 * time.Second) // a gap of 30 s: stale for 20 s, and nobody looked
		observe(t, g, "cpu", 10)
		resumed := time.Now()
		for range 59 {
			time.Sleep(time.Second)
			observe(t, g, "cpu", 10)
			require.True(t, g.Overloaded(), "the stale gap must restart the hold")
		}
		time.Sleep(time.Second)
		observe(t, g, "cpu", 10)
		assert.False(t, g.Overloaded())
		assert.Equal(t, resumed.Add(time.Minute), g.Stats().Since)
		assert.EqualValues(t, 1, g.Stats().StaleEvents)
	})
}

func TestNegativeStaleAfterDisablesStaleness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{StaleAfter: -1, Hold: time.Minute}, cpu)
		observe(t, g, "cpu", 90)
		observe(t, g, "cpu", 10)
		time.Sleep(24 * time.Hour)
		assert.Equal(t, hysteresis.Normal, g.State())
		assert.Equal(t, 0, g.Stats().Stale)
		assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered"}, rec.transitions())
	})
}
