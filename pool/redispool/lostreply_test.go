package redispool_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

var errLostReply = errors.New("connection reset: reply lost")

// lossy is an Inventory whose next putLost Puts and addLost Adds go
// through and then fail, as when every resend of the reply is lost.
type lossy struct {
	shared.Inventory
	mu               sync.Mutex
	putLost, addLost int
}

func (l *lossy) take(n *int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (l *lossy) Put(ctx context.Context, rec shared.Record, maxIdle int, ttl time.Duration) (bool, error) {
	ok, err := l.Inventory.Put(ctx, rec, maxIdle, ttl)
	if err == nil && l.take(&l.putLost) {
		return false, errLostReply
	}
	return ok, err
}

func (l *lossy) Add(ctx context.Context, rec shared.Record, ttl time.Duration) error {
	err := l.Inventory.Add(ctx, rec, ttl)
	if err == nil && l.take(&l.addLost) {
		return errLostReply
	}
	return err
}

// idleGuard is the shared provider, checking on every Destroy that the item
// is not idle in Redis, where another instance could pop it.
type idleGuard struct {
	*provider
	inv shared.Inventory
}

func (g idleGuard) Destroy(ctx context.Context, b box) error {
	recs, err := g.inv.Records(ctx)
	g.mu.Lock()
	if err != nil {
		g.problems = append(g.problems, err.Error())
	}
	for _, r := range recs {
		if r.ID == b.ID && r.Owner == "" {
			g.problems = append(g.problems, fmt.Sprintf("%s destroyed while idle in the shared inventory", b.ID))
		}
	}
	g.mu.Unlock()
	return g.provider.Destroy(ctx, b)
}

// A Put or Add whose reply is lost after it went through in Redis: the Pool
// finds out where the record stands, never destroys an item that may be
// idle in the shared set, and the other instance gets the item, alive.
func TestLostReplies(t *testing.T) {
	for _, addLost := range []int{0, 1} {
		t.Run(fmt.Sprintf("add_lost=%d", addLost), func(t *testing.T) { testLostReplies(t, addLost) })
	}
}

func testLostReplies(t *testing.T, addLost int) {
	r := redistest.OpenRedis(t)
	invs := openViews(t, r, 2)
	prov := newProvider()
	g := idleGuard{provider: prov, inv: invs[1]}
	l := &lossy{Inventory: invs[0], addLost: addLost}
	opts := pool.Options{MaxSize: 2, JanitorInterval: -1, Inventory: l, Instance: "gw-a"}
	a, err := pool.New[box](g, opts)
	require.NoError(t, err)
	opts.Inventory, opts.Instance = invs[1], "gw-b"
	b, err := pool.New[box](g, opts)
	require.NoError(t, err)

	h, err := a.Acquire(ctx) // its Add's reply may be lost
	require.NoError(t, err)
	id := h.ID()
	l.mu.Lock()
	l.putLost = 1
	l.mu.Unlock()
	h.Release() // the Put's too
	hb, err := b.Acquire(ctx)
	require.NoError(t, err)
	prov.hold(hb.Value(), "gw-b")
	assert.Equal(t, id, hb.ID(), "the item reached the shared idle set")
	time.Sleep(50 * time.Millisecond) // a destroy in flight would land now
	assert.True(t, prov.isLive(id))
	prov.unhold(hb.Value())
	hb.Release()
	closeAll(t, []*pool.Pool[box]{a, b})
	assert.Empty(t, prov.report())
	assert.Zero(t, prov.destroyedTwice())
	s := a.Stats()
	assert.Equal(t, uint64(1), s.Creates)
	assert.Zero(t, s.Destroyed[pool.ReasonLost]+s.Destroyed["evicted"])
}
