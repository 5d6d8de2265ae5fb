package expiry_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
)

// TestRandomOpsKeepInvariants runs random operations against a Map and a
// model of it, checks the Map's internal deadline index after each one and
// the Map's answers against the model.
func TestRandomOpsKeepInvariants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond}, Shards: 2})
		type modelEntry struct {
			v  int
			at time.Time // zero: no deadline
		}
		model := map[string]modelEntry{}
		live := func(k string) (modelEntry, bool) {
			e, ok := model[k]
			if ok && !e.at.IsZero() && !e.at.After(time.Now()) {
				return modelEntry{}, false
			}
			return e, ok
		}
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 20000 {
			k := strconv.Itoa(r.IntN(200))
			ttl := time.Duration(1+r.IntN(50)) * time.Millisecond
			switch r.IntN(9) {
			case 0:
				m.Set(k, i, time.Time{})
				model[k] = modelEntry{v: i}
			case 1, 2:
				require.NoError(t, m.SetWithTTL(k, i, ttl))
				model[k] = modelEntry{v: i, at: time.Now().Add(ttl)}
			case 3:
				_, want := live(k)
				require.Equal(t, want, del(m, k))
				delete(model, k)
			case 4:
				e, want := live(k)
				require.Equal(t, want, expireIn(m, k, ttl))
				if want {
					model[k] = modelEntry{v: e.v, at: time.Now().Add(ttl)}
				}
			case 5:
				e, want := live(k)
				require.Equal(t, want && !e.at.IsZero(), persist(m, k))
				if want {
					model[k] = modelEntry{v: e.v}
				}
			case 6:
				time.Sleep(time.Duration(r.IntN(5)) * time.Millisecond)
				if r.IntN(10) == 0 {
					m.Cycle(context.Background())
				}
			case 7:
				e, want := live(k)
				switch left := ttlOf(m, k); {
				case !want:
					require.Equal(t, missing, left)
				case e.at.IsZero():
					require.Equal(t, noDeadline, left)
				default:
					require.Equal(t, time.Until(e.at), left)
				}
			default:
				e, want := live(k)
				v, ok := m.Get(k)
				require.Equal(t, want, ok, "Get(%s)", k)
				if want {
					require.Equal(t, e.v, v)
				}
			}
			require.NoError(t, m.CheckInvariants(), "after op %d", i)
		}
	})
}

// TestStaleSlotsStayBounded: keys that lose their deadline leave stale
// slots behind; without any active expiry they must still be cleaned.
func TestStaleSlotsStayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond}, Shards: 1})
		for i := range 20000 {
			k := strconv.Itoa(i % 50)
			require.NoError(t, m.SetWithTTL(k, i, time.Hour))
			switch i % 3 {
			case 0:
				m.Delete(k)
			case 1:
				persist(m, k)
			default:
				m.Set(k, i, time.Time{})
			}
			require.NoError(t, m.CheckInvariants(), "after op %d", i)
		}
		assert.Equal(t, 0, m.Stats().KeysWithDeadline)
	})
}

// TestSampleIsFullDespiteStaleSlots: with as many stale slots as valid ones
// (half the keys lost their deadline), a round still examines n keys; it
// used to end at the first four stale slots in a row, and a round that
// examined none ended the cycle as if no key had a deadline.
func TestSampleIsFullDespiteStaleSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond}, Shards: 1})
		for i := range 2000 {
			require.NoError(t, m.SetWithTTL(strconv.Itoa(i), i, time.Hour))
		}
		for i := 0; i < 2000; i += 2 {
			require.True(t, persist(m, strconv.Itoa(i)))
		}
		for r := range 200 {
			s, x := m.ExpireSample(time.Now(), 20)
			require.Equal(t, 20, s, "round %d", r)
			require.Zero(t, x)
		}
		require.NoError(t, m.CheckInvariants())
	})
}
