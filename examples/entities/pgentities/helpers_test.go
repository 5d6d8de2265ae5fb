package pgentities_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/ttl"
)

// wait bounds how long a test waits for a notification from the server.
const wait = 10 * time.Second

// collector gathers what a Listener delivers.
type collector struct {
	mu    sync.Mutex
	ids   []string
	nils  int
	calls chan struct{}
}

func newCollector() *collector { return &collector{calls: make(chan struct{}, 1000)} }

func (c *collector) fn(ids []string) {
	c.mu.Lock()
	if ids == nil {
		c.nils++
	}
	c.ids = append(c.ids, ids...)
	c.mu.Unlock()
	c.calls <- struct{}{}
}

// waitFor waits until cond holds on the collected state.
func (c *collector) waitFor(t *testing.T, what string, cond func(ids []string, nils int) bool) {
	t.Helper()
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		ok := cond(c.ids, c.nils)
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.calls:
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("%s: not reached within %v; got %d ids, %d nil calls", what, wait, len(c.ids), c.nils)
		}
	}
}

// poolWithAppName opens a pool in the test's schema whose connections carry
// application_name app, so the test can find and terminate exactly them.
// It never pings idle connections, so the first use of a terminated one
// fails instead of being replaced silently.
func poolWithAppName(t *testing.T, pg *pgtest.Postgres, app string) *pgxpool.Pool {
	t.Helper()
	pool := pg.NamedPool(t, app, func(cfg *pgxpool.Config) {
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	require.NoError(t, pool.Ping(context.Background()))
	return pool
}

// terminate ends the server backends of application app and returns how
// many there were.
func terminate(t *testing.T, pg *pgtest.Postgres, app string) int {
	t.Helper()
	n, err := pg.Terminate(context.Background(), app)
	require.NoError(t, err)
	return n
}

// bufLen returns the number of activities buf holds.
func bufLen(ctx context.Context, buf ttl.Buffer) (int, error) {
	acts, err := buf.Peek(ctx, ttl.Activity{}, 1<<20)
	return len(acts), err
}
