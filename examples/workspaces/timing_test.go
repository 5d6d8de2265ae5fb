package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/controller"
	"github.com/ttlkit/ttlkit/examples/workspaces/proxy"
	"github.com/ttlkit/ttlkit/ttl"
)

// The design's timings: under testing/synctest, time is exact and a test
// of minutes takes milliseconds.
const (
	flushEvery = 30 * time.Second  // ACTIVITY_FLUSH_INTERVAL
	tickEvery  = 60 * time.Second  // COORDINATOR_TTL_INTERVAL
	standbyTTL = 600 * time.Second // TTL_STANDBY_SECONDS
	archiveTTL = 1800 * time.Second
)

// bubble is the whole system in one synctest bubble: memory table and
// buffer, the runner, one controller over workspaces that are not
// processes, and proxies (each with its own tracker) that the test calls
// directly, without a network.
type bubble struct {
	t       *testing.T
	store   *entities.MemoryStore
	buffer  *ttl.MemoryBuffer
	host    *fakeHost
	ctrl    *controller.Controller
	catalog *catalog.Catalog
	runner  *ttl.Runner
	keys    *auth.Keys
	proxies []*bubbleProxy

	mu        sync.Mutex
	decisions map[string][]ttl.Expiry // by workspace, with DecidedAt
	hold      bool                    // keep the runner's wakes from the controller
	held      []ttl.Expiry
}

type bubbleProxy struct {
	tracker *ttl.Tracker
	proxy   *proxy.Proxy
	dead    atomic.Bool // killed: nothing leaves it any more
}

// backendTransport answers every request for a workspace as its server
// would, in process.
type backendTransport struct{}

func (backendTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	_, _ = io.WriteString(rec, "workspace says hello")
	res := rec.Result()
	res.Request = r
	return res, nil
}

func newBubble(t *testing.T, proxies int) *bubble {
	b := &bubble{t: t, store: entities.NewMemoryStore(entities.MemoryStoreOptions{}), buffer: new(ttl.MemoryBuffer),
		decisions: map[string][]ttl.Expiry{}}
	b.host = newFakeHost(t, "workspace.test:80", 0)
	var err error
	b.ctrl, err = controller.New(b.store, b.host, controller.Options{Standby: standbyTTL, Interval: time.Hour})
	require.NoError(t, err)
	b.catalog = catalog.New(b.store, b.ctrl.WakeIDs)
	b.runner, err = ttl.NewRunner(b.store, Rules(standbyTTL, archiveTTL), ttl.RunnerOptions{
		Interval: tickEvery, Buffer: b.buffer, Wake: b.wake,
	})
	require.NoError(t, err)
	b.keys, err = auth.New(testSecret, testAdmin, nil)
	require.NoError(t, err)
	for range proxies {
		bp := &bubbleProxy{}
		sink := sinkFunc(func(ctx context.Context, acts []ttl.Activity) error {
			if bp.dead.Load() {
				return errors.New("proxy killed")
			}
			return b.buffer.Add(ctx, acts)
		})
		bp.tracker, err = ttl.NewTracker(sink, ttl.TrackerOptions{FlushInterval: flushEvery, Resolution: -1})
		require.NoError(t, err)
		bp.proxy, err = proxy.New(proxy.Options{Catalog: b.catalog, Routes: b.host, Recorder: bp.tracker, Keys: b.keys,
			Transport: backendTransport{}, StartTimeout: time.Minute})
		require.NoError(t, err)
		b.proxies = append(b.proxies, bp)
	}
	return b
}

// close stops everything, as a test's last step inside the bubble.
func (b *bubble) close() {
	ctx := context.Background()
	for _, p := range b.proxies {
		p.proxy.Close()
		_ = p.tracker.Close(ctx) // a killed proxy's last flush fails: its activity is lost
	}
	require.NoError(b.t, b.runner.Close(ctx))
	require.NoError(b.t, b.ctrl.Close(ctx))
	assert.Empty(b.t, b.host.overlapping())
}

// wake is the runner's Wake: it notes each decision, then passes it to
// the controller, unless the test holds the wakes back.
func (b *bubble) wake(ctx context.Context, exps []ttl.Expiry) error {
	b.mu.Lock()
	for _, x := range exps {
		b.decisions[x.ID] = append(b.decisions[x.ID], x)
	}
	if b.hold {
		b.held = append(b.held, exps...)
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	return b.ctrl.Wake(ctx, exps)
}

// release hands the held wakes to the controller.
func (b *bubble) release() {
	b.mu.Lock()
	held := b.held
	b.held, b.hold = nil, false
	b.mu.Unlock()
	require.NoError(b.t, b.ctrl.Wake(context.Background(), held))
	synctest.Wait()
}

func (b *bubble) decided(id string) []ttl.Expiry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]ttl.Expiry(nil), b.decisions[id]...)
}

// create makes a workspace and waits until it runs.
func (b *bubble) create(id string) {
	_, err := b.catalog.Create(context.Background(), id)
	require.NoError(b.t, err)
	synctest.Wait()
	require.Equal(b.t, catalog.Running, b.get(id).Phase)
}

func (b *bubble) get(id string) entities.Entity { return entity(b.t, b.store, id) }

// request sends GET /{id}/ with the workspace's token through proxy i and
// returns the status. A request held for a start returns once it is
// served: the bubble advances time meanwhile.
func (b *bubble) request(i int, id string) int {
	req := httptest.NewRequest("GET", "/"+id+"/api/files", nil)
	req.Header.Set("Authorization", "Bearer "+b.keys.WorkspaceToken(id, time.Now().Add(time.Hour)))
	rec := httptest.NewRecorder()
	b.proxies[i].proxy.ServeHTTP(rec, req)
	return rec.Code
}

// sleepUntil advances the bubble's time to t, in steps of one second,
// stopping early when cond holds; it returns when it stopped.
func sleepUntil(t time.Time, cond func() bool) time.Time {
	for time.Now().Before(t) {
		time.Sleep(time.Second)
		synctest.Wait()
		if cond != nil && cond() {
			break
		}
	}
	return time.Now()
}

// TestActivityReachesTableWithinFlushAndSync: a request's time is in the
// table (last_access_at) within ACTIVITY_FLUSH_INTERVAL +
// COORDINATOR_TTL_INTERVAL (90 s), whenever in the cycle it comes.
func TestActivityReachesTableWithinFlushAndSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, 1)
		defer b.close()
		b.create("ws-1")
		for _, offset := range []time.Duration{0, 7 * time.Second, 29 * time.Second, 31 * time.Second, 59 * time.Second} {
			time.Sleep(offset)
			at := time.Now()
			require.Equal(t, http.StatusOK, b.request(0, "ws-1"))
			reached := sleepUntil(at.Add(5*time.Minute), func() bool { return !b.get("ws-1").LastActivityAt.Before(at) })
			assert.Equal(t, at, b.get("ws-1").LastActivityAt, "the request's own time")
			assert.LessOrEqual(t, reached.Sub(at), flushEvery+tickEvery, "activity at +%v took %v to reach the table", offset, reached.Sub(at))
		}
	})
}

// TestIdleGoesToStandbyThenArchived: a workspace idle for the standby TTL
// is decided STANDBY at the first tick after it (never before), stopped at
// once, and archived at the first tick after the archive TTL; a request
// then brings it back, restored from its archive.
func TestIdleGoesToStandbyThenArchived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, 1)
		defer b.close()
		b.create("ws-1")
		time.Sleep(45 * time.Second)
		require.Equal(t, http.StatusOK, b.request(0, "ws-1"))
		last := time.Now()

		sleepUntil(last.Add(standbyTTL+5*time.Minute), func() bool { return len(b.decided("ws-1")) > 0 })
		d := b.decided("ws-1")
		require.Len(t, d, 1)
		assert.Equal(t, "standby", d[0].Rule)
		assert.Equal(t, last, d[0].LastActivityAt)
		assert.Greater(t, d[0].DecidedAt.Sub(last), standbyTTL, "never before the TTL")
		assert.LessOrEqual(t, d[0].DecidedAt.Sub(last), standbyTTL+tickEvery, "at the first tick after it")
		e := b.get("ws-1")
		assert.Equal(t, catalog.Standby, e.Phase, "stopped as soon as decided")
		assert.Equal(t, d[0].DecidedAt, e.PhaseChangedAt)
		assert.Equal(t, []string{"start", "stop"}, b.host.opsOf("ws-1"))

		sleepUntil(e.PhaseChangedAt.Add(archiveTTL+5*time.Minute), func() bool { return len(b.decided("ws-1")) > 1 })
		d = b.decided("ws-1")
		require.Len(t, d, 2)
		assert.Equal(t, "archive", d[1].Rule)
		assert.Greater(t, d[1].DecidedAt.Sub(e.PhaseChangedAt), archiveTTL)
		assert.LessOrEqual(t, d[1].DecidedAt.Sub(e.PhaseChangedAt), archiveTTL+tickEvery)
		assert.Equal(t, catalog.Archived, b.get("ws-1").Phase)

		// A request to the ARCHIVED workspace is held while it is restored
		// and started, then served.
		require.Equal(t, http.StatusOK, b.request(0, "ws-1"))
		assert.Equal(t, catalog.Running, b.get("ws-1").Phase)
		assert.Equal(t, []string{"start", "stop", "archive", "restore", "start"}, b.host.opsOf("ws-1"))
		assert.EqualValues(t, 1, b.proxies[0].proxy.Stats().Held)
	})
}

// TestActivityWhileRunnerExpires is the design's sequence "activity while
// the TTL expires": the runner decides STANDBY on the table's stale
// last_access_at while a request arrives. If the activity reaches the
// table before the controller acts, the controller sees it and the
// workspace stays RUNNING; if the controller acts first, the workspace
// stops, and the next request brings it back.
func TestActivityWhileRunnerExpires(t *testing.T) {
	t.Run("controller sees the activity: stays RUNNING", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, 1)
			defer b.close()
			b.create("ws-1")
			b.mu.Lock()
			b.hold = true
			b.mu.Unlock()
			sleepUntil(time.Now().Add(standbyTTL+5*time.Minute), func() bool { return len(b.decided("ws-1")) > 0 })
			x := b.decided("ws-1")[0]
			// The user types right after the decision; the activity reaches
			// the table with the next flush and tick.
			require.Equal(t, http.StatusOK, b.request(0, "ws-1"))
			at := time.Now()
			sleepUntil(at.Add(flushEvery+tickEvery), func() bool { return b.get("ws-1").LastActivityAt.Equal(at) })
			require.Equal(t, at, b.get("ws-1").LastActivityAt)
			assert.Equal(t, catalog.Standby, b.get("ws-1").DesiredState, "the decision stands until the controller acts")
			b.release()
			e := b.get("ws-1")
			assert.Equal(t, catalog.Running, e.Phase)
			assert.Empty(t, e.DesiredState, "the decision is cleared")
			assert.Equal(t, []string{"start"}, b.host.opsOf("ws-1"), "never stopped")
			assert.EqualValues(t, 1, b.ctrl.Stats().Kept)
			assert.True(t, e.LastActivityAt.After(x.LastActivityAt))
			// Idle from now on, it is decided again a TTL after the activity.
			sleepUntil(at.Add(standbyTTL+5*time.Minute), func() bool { return len(b.decided("ws-1")) > 1 })
			d := b.decided("ws-1")
			require.Len(t, d, 2)
			assert.Greater(t, d[1].DecidedAt.Sub(at), standbyTTL)
		})
	})
	t.Run("controller acts first: back to RUNNING on the request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, 1)
			defer b.close()
			b.create("ws-1")
			sleepUntil(time.Now().Add(standbyTTL+5*time.Minute), func() bool { return b.get("ws-1").Phase == catalog.Standby })
			require.Equal(t, catalog.Standby, b.get("ws-1").Phase)
			require.Equal(t, http.StatusOK, b.request(0, "ws-1"), "held, then served")
			e := b.get("ws-1")
			assert.Equal(t, catalog.Running, e.Phase)
			assert.Empty(t, e.DesiredState)
			assert.Equal(t, []string{"start", "stop", "start"}, b.host.opsOf("ws-1"))
			// AskRun merged the request straight into the table, so the
			// next tick does not find the woken workspace idle.
			assert.WithinDuration(t, time.Now(), e.LastActivityAt, time.Second)
			time.Sleep(2 * tickEvery)
			synctest.Wait()
			assert.Equal(t, catalog.Running, b.get("ws-1").Phase)
		})
	})
}

// TestProxyKilled: a proxy dies with activity it has not flushed. That
// activity is lost, so the workspace it served looks idle since the
// activity before; it goes to STANDBY at most one flush interval earlier
// than it would have, never before the TTL has passed since activity the
// table has. A workspace served by another proxy is not affected.
func TestProxyKilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, 2)
		defer b.close()
		b.create("ws-a")
		b.create("ws-b")
		// Both are used every 20 s, ws-a through proxy 0, ws-b through
		// proxy 1, for 5 minutes, between the flushes.
		var sent []time.Time        // ws-a's requests
		time.Sleep(5 * time.Second) // never at the instant of a flush
		for range 15 {
			time.Sleep(20 * time.Second)
			require.Equal(t, http.StatusOK, b.request(0, "ws-a"))
			require.Equal(t, http.StatusOK, b.request(1, "ws-b"))
			sent = append(sent, time.Now())
		}
		b.proxies[0].dead.Store(true) // killed: what it holds never leaves
		killed := time.Now()
		lastFlush := b.proxies[0].tracker.Stats().LastFlush
		// ws-b is still used, through proxy 1, for 15 minutes.
		for range 45 {
			time.Sleep(20 * time.Second)
			require.Equal(t, http.StatusOK, b.request(1, "ws-b"))
		}
		d := b.decided("ws-a")
		require.Len(t, d, 1, "ws-a went idle")
		// Lost: exactly what it recorded after its last flush, at most one
		// flush interval before it died.
		assert.LessOrEqual(t, killed.Sub(lastFlush), flushEvery)
		var flushed time.Time
		for _, at := range sent {
			if !at.After(lastFlush) {
				flushed = at
			}
		}
		assert.Equal(t, flushed, d[0].LastActivityAt, "the table has everything flushed before the kill")
		assert.Greater(t, d[0].DecidedAt.Sub(flushed), standbyTTL, "the TTL holds for what the table has")
		assert.LessOrEqual(t, d[0].DecidedAt.Sub(flushed), standbyTTL+tickEvery)
		assert.Equal(t, catalog.Standby, b.get("ws-a").Phase)
		assert.Empty(t, b.decided("ws-b"), "the other proxy's workspace never looked idle")
		assert.Equal(t, catalog.Running, b.get("ws-b").Phase)
		assert.Equal(t, []string{"start"}, b.host.opsOf("ws-b"))
	})
}
