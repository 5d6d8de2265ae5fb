package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/controller"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
)

// backendConfig is fastConfig on PostgreSQL (the test's schema) and Redis
// (redisURL, the activity buffer under key).
func backendConfig(t testing.TB, component string, pg *pgtest.Postgres, redisURL, key string) Config {
	c := fastConfig(t)
	c.Component = component
	c.PostgresURL, c.RedisURL, c.RedisKey = pg.URL(), redisURL, key
	return c
}

// seedStore opens the workspaces table as the system does, for a test to
// fill and read.
func seedStore(t testing.TB, pg *pgtest.Postgres) *pgentities.Store {
	s, err := pgentities.New(pg.Pool, pgttl.Options{Table: "workspaces", LastActivityColumn: "last_access_at", NoOperation: "NONE"})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	return s
}

func dbNow(t testing.TB, pg *pgtest.Postgres) time.Time {
	var now time.Time
	require.NoError(t, pg.Pool.QueryRow(context.Background(), "SELECT now()").Scan(&now))
	return now.UTC()
}

// decisions records the runner's decisions (Deps.Wake), by workspace.
type decisions struct {
	mu sync.Mutex
	m  map[string][]ttl.Expiry
}

func (d *decisions) wake(ctx context.Context, exps []ttl.Expiry, next func(context.Context, []ttl.Expiry) error) error {
	d.mu.Lock()
	if d.m == nil {
		d.m = map[string][]ttl.Expiry{}
	}
	for _, x := range exps {
		d.m[x.ID] = append(d.m[x.ID], x)
	}
	d.mu.Unlock()
	return next(ctx, exps)
}

func (d *decisions) of(id string) []ttl.Expiry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]ttl.Expiry(nil), d.m[id]...)
}

// slowestTick watches r's ticks until the test ends; the func it returns
// gives the longest tick seen so far.
func slowestTick(t *testing.T, r *ttl.Runner) func() time.Duration {
	var worst atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if d := int64(r.Stats().LastTickDuration); d > worst.Load() {
				worst.Store(d)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() time.Duration { return time.Duration(worst.Load()) }
}

// runningWorkspaces creates nActive workspaces in use ("active-NNN") and
// nIdle that go idle ("idle-NN", created stagger apart from now), all
// RUNNING on fake, and returns their ids.
func runningWorkspaces(t *testing.T, store entities.Store, fake *fakeHost, now time.Time, nActive, nIdle int, stagger time.Duration) (active, idle []string) {
	t.Helper()
	var es []entities.Entity
	for i := range nActive {
		id := fmt.Sprintf("active-%03d", i)
		active = append(active, id)
		es = append(es, entities.Entity{ID: id, Phase: catalog.Running, CreatedAt: now})
		fake.setRunning(id)
	}
	for i := range nIdle {
		id := fmt.Sprintf("idle-%02d", i)
		idle = append(idle, id)
		es = append(es, entities.Entity{ID: id, Phase: catalog.Running, CreatedAt: now.Add(time.Duration(i) * stagger)})
		fake.setRunning(id)
	}
	_, err := store.CreateMany(context.Background(), es)
	require.NoError(t, err)
	return active, idle
}

// idleOnTime checks that every workspace of ids went to STANDBY on one
// decision, more than ttl after its last activity (whatever the load) and
// at most late after that, stretched by what the machine's load measured:
// stretch, which it reports.
func idleOnTime(t *testing.T, store entities.Store, dec *decisions, ids []string, ttl, late time.Duration, stretch func() (time.Duration, string)) {
	t.Helper()
	d, why := stretch()
	late += d
	t.Logf("lateness allowed: %v (%s)", late, why)
	for _, id := range ids {
		e := waitPhase(t, store, id, catalog.Standby, 10*time.Second)
		d := dec.of(id)
		require.Len(t, d, 1, id)
		idleFor := d[0].DecidedAt.Sub(e.LastActivityAt)
		require.Greater(t, idleFor, ttl, "%s: never before the TTL", id)
		require.LessOrEqual(t, idleFor, ttl+late, "%s: on time", id)
	}
}

// backend is the server every synthetic workspace answers from.
func backend(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// traffic sends a request to every workspace of ids through the proxies,
// in turn, every period, until stop is closed.
func traffic(t *testing.T, owners []*owner, bases []string, period time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(period)
			defer tick.Stop()
			for n := i; ; n++ {
				if n > i { // the first request at once, then one per period
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
				req, _ := http.NewRequest("GET", bases[n%len(bases)]+"/"+o.id+"/", nil)
				req.Header.Set("Authorization", "Bearer "+o.token)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("%s: %v", o.id, err)
					return
				}
				_ = res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("%s: %d", o.id, res.StatusCode)
				}
			}
		}()
	}
	return &wg
}

// ownersOf returns owners of the workspaces ids (tokens minted with the
// test secret), speaking to base.
func ownersOf(t testing.TB, sys *System, base string, ids []string) []*owner {
	out := make([]*owner, len(ids))
	for i, id := range ids {
		out[i] = &owner{t: t, base: base, id: id, token: sys.keys.WorkspaceToken(id, time.Now().Add(time.Hour))}
	}
	return out
}

// TestRedisRestart restarts the Redis server of the activity buffer in the
// middle of a run, without persistence, so its sorted set is lost.
// PostgreSQL still decides: no workspace in use goes to STANDBY (the
// runner holds its idle rule, the proxies' trackers send their recent
// activity again), activity reaches the table again within a flush and a
// sync of Redis answering, and idle workspaces still go to STANDBY, never
// before their TTL.
func TestRedisRestart(t *testing.T) {
	delay := testenv.SchedDelay(t)
	rs := redistest.StartRedis(t, redistest.RedisServerOptions{})
	pg := pgtest.OpenPostgres(t)
	store := seedStore(t, pg)
	fake := newFakeHost(t, backend(t), 0)
	var dec decisions
	cfg := backendConfig(t, "all", pg, rs.URL(), "codehub:activity")
	cfg.Standby = 3 * time.Second
	cfg.Archive = time.Hour
	sys := startSystem(t, cfg, Deps{Runtime: fake, Routes: fake, Wake: dec.wake})
	base := "http://" + sys.Addr()

	active, idle := runningWorkspaces(t, store, fake, dbNow(t, pg), 20, 5, 200*time.Millisecond)

	stop := make(chan struct{})
	wg := traffic(t, ownersOf(t, sys, base, active), []string{base}, 200*time.Millisecond, stop)
	time.Sleep(time.Second)
	rs.Restart(300 * time.Millisecond) // comes back empty
	up := time.Now()
	// Every active workspace's activity is in the table again soon after
	// Redis answers.
	var caughtUp time.Duration
	require.Eventually(t, func() bool {
		for _, id := range active {
			if entity(t, store, id).LastActivityAt.Before(up) {
				return false
			}
		}
		caughtUp = time.Since(up)
		return true
	}, 10*time.Second, 20*time.Millisecond)
	t.Logf("activity of every active workspace in the table %v after Redis answered (flush %v + sync %v)", caughtUp, cfg.FlushInterval, cfg.TickInterval)
	assert.Less(t, caughtUp, 2*time.Second, "within a flush and a sync, plus the client's reconnect")
	time.Sleep(cfg.Standby + time.Second)
	close(stop)
	wg.Wait()

	for _, id := range active {
		assert.Empty(t, dec.of(id), "%s was in use: never decided idle", id)
		assert.Empty(t, fake.opsOf(id), "%s was never stopped", id)
	}
	// Decisions due during the outage come late by the outage and the
	// runner's hold, at most.
	idleOnTime(t, store, &dec, idle, cfg.Standby, 3*time.Second, func() (time.Duration, string) {
		// A proxy's flush, the runner's tick and its store call each wait
		// to be scheduled.
		return 3 * delay(), fmt.Sprintf("3 × the worst scheduling delay, %v", delay())
	})
	assert.GreaterOrEqual(t, sys.runner.Stats().BufferLosses, uint64(1), "the runner saw the loss")
	assert.GreaterOrEqual(t, sys.tracker.Stats().SinkLosses, uint64(1), "the proxy saw the loss and sent again")
	assert.Empty(t, fake.overlapping())
}

// TestSeparateComponentsAtScale runs three proxies, one runner and two
// controllers as separate systems (each with its own connections, as
// separate processes have) on one Redis and one PostgreSQL, over 10,000
// workspaces, most of them idle and not running: 8,000 ARCHIVED, 1,300 in
// STANDBY (200 of them due for archiving during the test), 700 RUNNING
// (150 in use through the three proxies, 550 going idle during the test).
// No workspace in use is stopped, every idle one is decided on time, and
// no workspace is ever operated on by both controllers at once.
func TestSeparateComponentsAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 workspaces")
	}
	delay := testenv.SchedDelay(t)
	pg := pgtest.OpenPostgres(t)
	rd := redistest.OpenRedis(t)
	redisURL := os.Getenv(testenv.EnvRedis)
	key := rd.Prefix + "codehub:activity"
	store := seedStore(t, pg)
	fake := newFakeHost(t, backend(t), 5*time.Millisecond)
	var dec decisions
	// A TTL well above what a loaded machine makes of the first request
	// through a proxy that has not routed a workspace yet (its route looked
	// up among 10,000): a workspace's traffic waits for its previous request.
	const standby, archive = 6 * time.Second, time.Minute
	conf := func(component string) Config {
		c := backendConfig(t, component, pg, redisURL, key)
		c.Standby, c.Archive = standby, archive
		c.FlushInterval, c.TickInterval = 250*time.Millisecond, 250*time.Millisecond
		c.ReconcileInterval = 2 * time.Second
		return c
	}
	deps := Deps{Runtime: fake, Routes: fake, Wake: dec.wake}
	var proxies []string
	var first *System
	for range 3 {
		s := startSystem(t, conf("proxy"), deps)
		proxies = append(proxies, "http://"+s.Addr())
		if first == nil {
			first = s
		}
	}
	runner := startSystem(t, conf("runner"), deps)
	ctrl := []*System{startSystem(t, conf("controller"), deps), startSystem(t, conf("controller"), deps)}

	now := dbNow(t, pg)
	es := make([]entities.Entity, 0, 10000)
	add := func(prefix string, n int, phase string, last, changed func(i int) time.Time) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s-%05d", prefix, i)
			ids = append(ids, id)
			es = append(es, entities.Entity{ID: id, Phase: phase, CreatedAt: now.Add(-48 * time.Hour), LastActivityAt: last(i), PhaseChangedAt: changed(i)})
			if phase == catalog.Running {
				fake.setRunning(id)
			}
		}
		return ids
	}
	longAgo := func(int) time.Time { return now.Add(-24 * time.Hour) }
	add("archived", 8000, catalog.Archived, longAgo, longAgo)
	add("standby", 1100, catalog.Standby, longAgo, func(int) time.Time { return now })
	archiving := add("archiving", 200, catalog.Standby, longAgo, func(i int) time.Time {
		return now.Add(-archive + 500*time.Millisecond + time.Duration(i)*10*time.Millisecond)
	})
	idle := add("idle", 550, catalog.Running, func(i int) time.Time {
		return now.Add(-standby + 500*time.Millisecond + time.Duration(i)*5*time.Millisecond)
	}, longAgo)
	start := time.Now()
	_, err := store.CreateMany(context.Background(), es)
	require.NoError(t, err)
	// The workspaces in use are created last, their last activity the
	// database's time just before, and their traffic starts at once: on a
	// loaded machine the 9,850 others can take longer than the TTL to
	// create, and a workspace nobody has used for that long is idle.
	es, now = es[:0], dbNow(t, pg)
	active := add("active", 150, catalog.Running, func(int) time.Time { return now }, longAgo)
	_, err = store.CreateMany(context.Background(), es)
	require.NoError(t, err)
	t.Logf("10,000 workspaces created in %v", time.Since(start))
	tick := slowestTick(t, runner.runner) // the ticks that decide, not those beside the bulk create

	stop := make(chan struct{})
	wg := traffic(t, ownersOf(t, first, "", active), proxies, 500*time.Millisecond, stop)
	time.Sleep(standby + 3*time.Second)
	// The traffic goes on until the last check: the workspaces in use
	// stay in use while the others' decisions are checked.
	defer wg.Wait()
	defer close(stop)

	// The slack covers a tick's work and a loaded machine; the bound
	// itself is one tick.
	const slack = 2 * time.Second
	for _, id := range active {
		require.Empty(t, dec.of(id), "%s was in use", id)
		require.Empty(t, fake.opsOf(id), "%s was in use", id)
	}
	idleOnTime(t, store, &dec, idle, standby, 250*time.Millisecond+slack, func() (time.Duration, string) {
		// As well as waiting to be scheduled, a decision due just after a
		// tick began waits for that tick and the next, each as slow as
		// the load makes the runner's ticks over 10,000 workspaces.
		return 3*delay() + 2*tick(), fmt.Sprintf("3 × the worst scheduling delay, %v, and 2 × the slowest tick, %v", delay(), tick())
	})
	for _, id := range idle {
		require.Equal(t, []string{"stop"}, fake.opsOf(id), id)
	}
	for _, id := range archiving {
		waitPhase(t, store, id, catalog.Archived, 10*time.Second)
		d := dec.of(id)
		require.Len(t, d, 1, id)
		require.Equal(t, "archive", d[0].Rule)
		require.Equal(t, []string{"archive"}, fake.opsOf(id), id)
	}
	got, err := store.List(context.Background(), entities.Filter{Phase: catalog.Running, Limit: 10000})
	require.NoError(t, err)
	assert.Len(t, got, len(active), "only the workspaces in use still run")
	assert.Empty(t, fake.overlapping(), "two operations at once on one workspace")
	a, b := ctrl[0].controller.Stats(), ctrl[1].controller.Stats()
	t.Logf("controller 1: %+v", a)
	t.Logf("controller 2: %+v", b)
	t.Logf("runner: %+v", runner.runner.Stats())
	assert.EqualValues(t, len(idle)+len(archiving), a.Stopped+b.Stopped+a.Archived+b.Archived, "each operation done once")
}

// TestProxyProcessKilled kills a proxy process with SIGKILL while its
// workspace is in use: what it recorded since its last flush is lost, so
// the table's last activity for that workspace is at most one flush
// interval (plus the time between two requests) behind the last request,
// and the workspace goes to STANDBY by what the table has. A workspace
// used through another proxy is not affected.
func TestProxyProcessKilled(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	rd := redistest.OpenRedis(t)
	redisURL := os.Getenv(testenv.EnvRedis)
	key := rd.Prefix + "codehub:activity"
	store := seedStore(t, pg)
	cfg := backendConfig(t, "controller", pg, redisURL, key)
	cfg.FlushInterval = time.Second
	// A TTL well above a start on a loaded machine (seconds) plus a flush:
	// a new workspace is idle from its creation until the first flush of
	// its activity.
	cfg.Standby = 6 * time.Second
	cfg.Archive = time.Hour
	other := cfg
	other.Component = "proxy"
	ctrl := startSystem(t, cfg, Deps{})
	runnerCfg := cfg
	runnerCfg.Component = "runner"
	startSystem(t, runnerCfg, Deps{})
	px := startSystem(t, other, Deps{})

	// The proxy to kill: this test binary as "workspaces proxy".
	cmd := exec.Command(os.Args[0], "proxy", "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+cfg.PostgresURL, "REDIS_URL="+redisURL, "ACTIVITY_KEY="+key,
		"WORKSPACES_DIR="+cfg.DataDir, "WORKSPACES_SECRET="+testSecret, "ADMIN_TOKEN="+testAdmin,
		"TTL_STANDBY_SECONDS=6", "TTL_ARCHIVE_SECONDS=3600", "ACTIVITY_FLUSH_INTERVAL=1", "COORDINATOR_TTL_INTERVAL=0.1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = testWriter{t}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make([]byte, 256)
	n, err := out.Read(line)
	require.NoError(t, err)
	victim := "http://" + strings.Fields(strings.TrimPrefix(string(line[:n]), "workspaces: admin page http://"))[0]
	victim = strings.TrimSuffix(victim, "/admin/")

	base := "http://" + px.Addr()
	a, b := create(t, base, "ws-a"), create(t, base, "ws-b")
	waitPhase(t, store, "ws-a", catalog.Running, 10*time.Second)
	waitPhase(t, store, "ws-b", catalog.Running, 10*time.Second)
	a = a.via(victim)
	for range 12 {
		code, body := a.do("GET", "/api/files", "")
		require.Equal(t, http.StatusOK, code, body)
		b.do("GET", "/api/files", "")
		time.Sleep(250 * time.Millisecond)
	}
	code, _ := a.do("GET", "/api/files", "")
	require.Equal(t, http.StatusOK, code)
	last := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	// ws-b stays in use through the other proxy; ws-a is idle from now.
	stop := make(chan struct{})
	wg := traffic(t, []*owner{b}, []string{base}, 300*time.Millisecond, stop)
	e := waitPhase(t, store, "ws-a", catalog.Standby, 15*time.Second)
	close(stop)
	wg.Wait()
	lost := last.Sub(e.LastActivityAt)
	t.Logf("activity lost with the proxy: the last %v", lost)
	assert.LessOrEqual(t, lost, cfg.FlushInterval+250*time.Millisecond+100*time.Millisecond, "at most a flush interval (and a request period)")
	assert.Greater(t, e.PhaseChangedAt.Sub(e.LastActivityAt), cfg.Standby, "by what the table has, never before the TTL")
	eb := entity(t, store, "ws-b")
	assert.Equal(t, catalog.Running, eb.Phase, "the other proxy's workspace is not affected")
	assert.Empty(t, eb.DesiredState)
	assert.EqualValues(t, 1, ctrl.controller.Stats().Stopped)
}

// TestComponentsAnswerOnlyTheirHosts: the runner and a controller, each run
// alone on PostgreSQL, serve /metrics and /healthz under the proxy's rules:
// a Host that is not theirs (a DNS-rebinding name) is refused on every
// path, and so is another site's request; an address, a loopback name and
// a name in ALLOWED_HOSTS are answered.
func TestComponentsAnswerOnlyTheirHosts(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	for _, component := range []string{"runner", "controller"} {
		cfg := backendConfig(t, component, pg, "", "")
		cfg.AllowedHosts = []string{"ops.example"}
		sys := startSystem(t, cfg, Deps{})
		base := "http://" + sys.Addr()
		port := base[strings.LastIndex(base, ":")+1:]
		for _, path := range []string{"/metrics", "/healthz", "/no-such-page"} {
			res, body := exchange(t, "GET", base+path, http.Header{"Host": {"rebind.example:" + port}}, "")
			assert.Equal(t, http.StatusForbidden, res.StatusCode, "%s %s", component, path)
			assert.Contains(t, body, "Unknown address", "%s %s", component, path)
		}
		for _, path := range []string{"/metrics", "/healthz"} {
			res := send(t, "GET", base+path, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"no-cors"}, "Sec-Fetch-Dest": {"image"}}, "")
			assert.Equal(t, http.StatusForbidden, res.StatusCode, "%s %s from another site", component, path)
			for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "ops.example:" + port} {
				res := send(t, "GET", base+path, http.Header{"Host": {host}}, "")
				assert.Equal(t, http.StatusOK, res.StatusCode, "%s %s for %s", component, path, host)
			}
		}
		// Each exports the library parts it runs, and only those.
		m := scrapeMetrics(t, base)
		switch component {
		case "runner":
			assert.GreaterOrEqual(t, metricValue(t, m, "workspaces_runner_ticks_total"), 0.0)
			assert.NotContains(t, m, "workspaces_claims_")
		case "controller":
			assert.Equal(t, float64(controller.ClaimBudget), metricValue(t, m, "workspaces_claims_budget_units"))
			assert.NotContains(t, m, "workspaces_runner_")
		}
		assert.NotContains(t, m, "workspaces_activity_", "no proxy, no tracker")
	}
}
