package pgnotify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/examples/entities/pgnotify"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/ttl"
)

func TestChunk(t *testing.T) {
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = fmt.Sprintf("workspace-%06d-\"quoted\"-é", i)
	}
	chunks, err := pgnotify.Chunk(ids, pgnotify.MaxPayload)
	require.NoError(t, err)
	require.Greater(t, len(chunks), 1)
	var all []string
	for _, c := range chunks {
		assert.LessOrEqual(t, len(c), pgnotify.MaxPayload)
		var part []string
		require.NoError(t, json.Unmarshal([]byte(c), &part))
		all = append(all, part...)
	}
	assert.Equal(t, ids, all)

	chunks, err = pgnotify.Chunk(nil, pgnotify.MaxPayload)
	require.NoError(t, err)
	assert.Empty(t, chunks)
	_, err = pgnotify.Chunk([]string{"ok", strings.Repeat("x", pgnotify.MaxPayload)}, pgnotify.MaxPayload)
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	chunks, err = pgnotify.Chunk([]string{strings.Repeat("x", pgnotify.MaxPayload-4)}, pgnotify.MaxPayload)
	require.NoError(t, err)
	assert.Len(t, chunks, 1)
	assert.Len(t, chunks[0], pgnotify.MaxPayload)
}

func TestNotifyReachesListenerOnAnotherConnection(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	c := entitiestest.NewCollector()
	l, err := pgnotify.Listen(ctx, pg.NewPool(t), "ttl_wake", c.Fn, pgnotify.ListenOptions{})
	require.NoError(t, err)
	defer l.Close(context.Background())

	n, err := pgnotify.NewNotifier(pg.Pool, "ttl_wake")
	require.NoError(t, err)
	ids := make([]string, 1500) // ~3 payloads
	for i := range ids {
		ids[i] = fmt.Sprintf("ws-%04d", i)
	}
	require.NoError(t, n.Wake(ctx, ids))
	c.WaitFor(t, "all ids", func(got []string, _ int) bool { return len(got) >= len(ids) })
	assert.Equal(t, ids, c.IDs(), "every id once, in order")

	// A hand-written NOTIFY without JSON is one id.
	_, err = pg.Pool.Exec(ctx, `NOTIFY ttl_wake, 'ws-by-hand'`)
	require.NoError(t, err)
	c.WaitFor(t, "hand-written notify", func(got []string, _ int) bool { return got[len(got)-1] == "ws-by-hand" })
	require.NoError(t, n.Wake(ctx, nil), "no ids is a no-op")

	require.NoError(t, l.Close(context.Background()))
	require.NoError(t, l.Close(context.Background()), "Close is idempotent")
}

func TestNotifyValidates(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	require.NoError(t, err)
	defer pool.Close()
	for _, bad := range []string{"", "a-b", `x"y`, strings.Repeat("c", 64)} {
		_, err := pgnotify.NewNotifier(pool, bad)
		assert.ErrorIs(t, err, ttl.ErrInvalid, "channel %q", bad)
		_, err = pgnotify.Listen(context.Background(), pool, bad, func([]string) {}, pgnotify.ListenOptions{})
		assert.ErrorIs(t, err, ttl.ErrInvalid, "channel %q", bad)
	}
	_, err = pgnotify.Listen(context.Background(), pool, "ok", nil, pgnotify.ListenOptions{})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	_, err = pgnotify.Listen(context.Background(), pool, "ok", func([]string) {}, pgnotify.ListenOptions{RetryInterval: -1})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	// An unreachable server fails Listen, wrapped, without a goroutine left.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = pgnotify.Listen(ctx, pool, "ok", func([]string) {}, pgnotify.ListenOptions{})
	assert.ErrorContains(t, err, "pgnotify: listen ok")
}

// TestListenerReconnects: when its backend is terminated, the Listener
// reports the error, reconnects, calls fn(nil) and hears later wakes.
func TestListenerReconnects(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	app := testenv.UniqueName()
	lpool := pg.FragilePool(t, app)
	c := entitiestest.NewCollector()
	var (
		errMu  sync.Mutex
		errors []error
	)
	l, err := pgnotify.Listen(ctx, lpool, "ttl_wake", c.Fn, pgnotify.ListenOptions{
		RetryInterval: 20 * time.Millisecond,
		OnError:       func(err error) { errMu.Lock(); errors = append(errors, err); errMu.Unlock() },
	})
	require.NoError(t, err)
	defer l.Close(context.Background())
	require.Equal(t, 1, terminate(t, pg, app))
	c.WaitFor(t, "reconnect", func(_ []string, nils int) bool { return nils == 1 })
	errMu.Lock()
	require.NotEmpty(t, errors)
	assert.ErrorContains(t, errors[0], "pgnotify: listen ttl_wake")
	errMu.Unlock()

	n, err := pgnotify.NewNotifier(pg.Pool, "ttl_wake")
	require.NoError(t, err)
	require.NoError(t, n.Wake(ctx, []string{"after"}))
	c.WaitFor(t, "wake after reconnect", func(got []string, _ int) bool { return len(got) == 1 && got[0] == "after" })
}

// terminate ends the server backends of application app and returns how
// many there were.
func terminate(t *testing.T, pg *pgtest.Postgres, app string) int {
	t.Helper()
	n, err := pg.Terminate(context.Background(), app)
	require.NoError(t, err)
	return n
}

// TestWakeExpiredCarriesDecision: a controller in another process gets the
// decision and the LastActivityAt it was based on; a Listen callback gets
// the ids of the same notification.
func TestWakeExpiredCarriesDecision(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	got := make(chan []ttl.Expiry, 10)
	l, err := pgnotify.ListenExpired(ctx, pg.NewPool(t), "ttl_wake", func(exps []ttl.Expiry) { got <- exps }, pgnotify.ListenOptions{})
	require.NoError(t, err)
	defer l.Close(context.Background())
	c := entitiestest.NewCollector()
	l2, err := pgnotify.Listen(ctx, pg.NewPool(t), "ttl_wake", c.Fn, pgnotify.ListenOptions{})
	require.NoError(t, err)
	defer l2.Close(context.Background())

	n, err := pgnotify.NewNotifier(pg.Pool, "ttl_wake")
	require.NoError(t, err)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 123456000, time.UTC)
	exps := make([]ttl.Expiry, 200) // several payloads
	for i := range exps {
		exps[i] = ttl.Expiry{ID: fmt.Sprintf("ws-%03d", i), Rule: "standby", Then: "STANDBY",
			LastActivityAt: t0.Add(time.Duration(i) * time.Second), DecidedAt: t0.Add(time.Hour)}
	}
	require.NoError(t, n.WakeExpired(ctx, exps))
	var all []ttl.Expiry
	for len(all) < len(exps) {
		select {
		case part := <-got:
			all = append(all, part...)
		case <-time.After(entitiestest.Wait):
			t.Fatalf("got %d of %d decisions", len(all), len(exps))
		}
	}
	assert.Equal(t, exps, all)
	c.WaitFor(t, "ids", func(ids []string, _ int) bool { return len(ids) == len(exps) })
	assert.Equal(t, "ws-199", c.IDs()[199])

	require.NoError(t, n.Wake(ctx, []string{"by-id"}))
	select {
	case part := <-got:
		assert.Equal(t, []ttl.Expiry{{ID: "by-id"}}, part)
	case <-time.After(entitiestest.Wait):
		t.Fatal("no wake by id")
	}
	require.NoError(t, n.WakeExpired(ctx, nil), "no decisions is a no-op")
}
