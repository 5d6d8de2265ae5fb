package testenv_test

import (
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"

	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records what a helper did to it instead of
// doing it, so the policy can be observed without failing the real test.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
	cleanups        []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// run calls open with a recorder on its own goroutine (Skipf and Fatalf end
// that goroutine, as they do a test's) and then runs the registered cleanups.
func run(t *testing.T, open func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		open(r)
	}()
	wg.Wait()
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return r
}

var openers = map[string]struct {
	env         string
	unreachable string
	open        func(testing.TB)
}{
	"redis":    {testenv.EnvRedis, "redis://127.0.0.1:1/0", func(t testing.TB) { redistest.OpenRedis(t) }},
	"cluster":  {testenv.EnvRedisCluster, "127.0.0.1:1", func(t testing.TB) { redistest.OpenRedisCluster(t) }},
	"postgres": {testenv.EnvPostgres, "postgres://root@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", func(t testing.TB) { pgtest.OpenPostgres(t) }},
	"mysql":    {testenv.EnvMySQL, "root@tcp(127.0.0.1:1)/test", func(t testing.TB) { mysqltest.OpenMySQL(t) }},
}

func TestUnsetSkips(t *testing.T) {
	for name, o := range openers {
		t.Run(name, func(t *testing.T) {
			t.Setenv(o.env, "")
			t.Setenv(testenv.EnvRequire, "")
			r := run(t, o.open)
			assert.True(t, r.skipped, "want skip")
			assert.False(t, r.failed)
			assert.Contains(t, r.msg, o.env+" is not set")
		})
	}
}

func TestUnsetFailsWhenRequired(t *testing.T) {
	for name, o := range openers {
		t.Run(name, func(t *testing.T) {
			t.Setenv(o.env, "")
			t.Setenv(testenv.EnvRequire, "1")
			r := run(t, o.open)
			assert.True(t, r.failed, "want failure")
			assert.False(t, r.skipped)
			assert.Contains(t, r.msg, testenv.EnvRequire+"=1")
		})
	}
}

func TestUnreachableSkipsOrFails(t *testing.T) {
	for name, o := range openers {
		t.Run(name, func(t *testing.T) {
			t.Setenv(o.env, o.unreachable)
			t.Setenv(testenv.EnvRequire, "")
			r := run(t, o.open)
			assert.True(t, r.skipped, "want skip, got %q", r.msg)
			assert.Contains(t, r.msg, "does not answer")

			t.Setenv(testenv.EnvRequire, "1")
			r = run(t, o.open)
			assert.True(t, r.failed, "want failure, got %q", r.msg)
			assert.False(t, r.skipped)
			assert.Contains(t, r.msg, "does not answer")
		})
	}
}

func TestUniqueName(t *testing.T) {
	a, b := testenv.UniqueName(), testenv.UniqueName()
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^ttlkit_t_[0-9a-f]{16}$`, a)
}

// The tests below run against the real servers and prove the isolation and
// cleanup each helper promises.

func TestRedisPrefixIsCleanedUp(t *testing.T) {
	ctx := context.Background()
	var prefix string
	t.Run("use", func(t *testing.T) {
		r := redistest.OpenRedis(t)
		prefix = r.Prefix
		require.True(t, strings.HasPrefix(prefix, "ttlkit_t_"))
		for i := range 1500 { // more than one delete batch
			require.NoError(t, r.Client.Set(ctx, fmt.Sprintf("%sk%d", prefix, i), i, 0).Err())
		}
		keys, err := r.Keys(ctx)
		require.NoError(t, err)
		require.Len(t, keys, 1500)
	})
	r := redistest.OpenRedis(t)
	n, err := r.Client.Exists(ctx, prefix+"k0", prefix+"k1499").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "keys under the prefix survived the test")
}

func TestPostgresSchemaIsolatedAndDropped(t *testing.T) {
	ctx := context.Background()
	var schema string
	t.Run("use", func(t *testing.T) {
		p := pgtest.OpenPostgres(t)
		schema = p.Schema
		_, err := p.Pool.Exec(ctx, "CREATE TABLE items (id int)")
		require.NoError(t, err)
		var got string
		require.NoError(t, p.Pool.QueryRow(ctx,
			"SELECT table_schema FROM information_schema.tables WHERE table_name = 'items' AND table_schema = current_schema()").Scan(&got))
		assert.Equal(t, schema, got)
		other := p.NewPool(t)
		_, err = other.Exec(ctx, "INSERT INTO items VALUES (1)")
		require.NoError(t, err, "a second pool sees the same schema")
	})
	p := pgtest.OpenPostgres(t)
	var n int
	require.NoError(t, p.Pool.QueryRow(ctx,
		"SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n))
	assert.Zero(t, n, "schema survived the test")
}

func TestMySQLDatabaseIsolatedAndDropped(t *testing.T) {
	ctx := context.Background()
	var database string
	t.Run("use", func(t *testing.T) {
		m := mysqltest.OpenMySQL(t)
		database = m.Database
		_, err := m.DB.ExecContext(ctx, "CREATE TABLE items (id int)")
		require.NoError(t, err)
		var got string
		require.NoError(t, m.DB.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&got))
		assert.Equal(t, database, got)
		_, err = m.NewDB(t).ExecContext(ctx, "INSERT INTO items VALUES (1)")
		require.NoError(t, err)
	})
	m := mysqltest.OpenMySQL(t)
	var n int
	require.NoError(t, m.DB.QueryRowContext(ctx,
		"SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", database).Scan(&n))
	assert.Zero(t, n, "database survived the test")
}

func TestRedisKillClientsKillsOnlyNamed(t *testing.T) {
	ctx := context.Background()
	r := redistest.OpenRedis(t)
	c, name := r.NamedClient(t, "victim", -1)
	require.NoError(t, c.Ping(ctx).Err())
	n, err := r.KillClients(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, r.Client.Ping(ctx).Err(), "the admin connection survives")
	n, err = r.KillClients(ctx, name)
	require.NoError(t, err)
	assert.Zero(t, n, "the named connection is gone")
	require.NoError(t, c.Ping(ctx).Err(), "the client reconnects")
	n, err = r.KillClients(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "its new connection carries the name too")
}

func TestPostgresTerminateEndsOnlyNamed(t *testing.T) {
	ctx := context.Background()
	p := pgtest.OpenPostgres(t)
	pool := p.NamedPool(t, "ttlkit_victim_"+p.Schema, nil)
	require.NoError(t, pool.Ping(ctx))
	var path string
	require.NoError(t, pool.QueryRow(ctx, "SHOW search_path").Scan(&path))
	assert.Equal(t, p.Schema, path)
	n, err := p.Terminate(ctx, "ttlkit_victim_"+p.Schema)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, p.Pool.Ping(ctx), "the test's own pool survives")
}

// TestStartRedis: a private server restarts empty without AOF and with its
// data with AOF (fsync always), and is gone after the test.
func TestStartRedis(t *testing.T) {
	ctx := context.Background()
	for _, aof := range []bool{false, true} {
		t.Run(fmt.Sprint("aof=", aof), func(t *testing.T) {
			var addr string
			t.Run("server", func(t *testing.T) {
				s := redistest.StartRedis(t, redistest.RedisServerOptions{AppendOnly: aof})
				addr = s.Addr
				c := s.NewClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
				require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
				before, err := s.RunID(ctx)
				require.NoError(t, err)
				s.Restart(0)
				after, err := s.RunID(ctx)
				require.NoError(t, err)
				assert.NotEqual(t, before, after, "run_id did not change across a restart")
				v, err := c.Get(ctx, "k").Result()
				if aof {
					require.NoError(t, err)
					assert.Equal(t, "v", v)
				} else {
					require.ErrorIs(t, err, redis.Nil, "the data survived a restart without AOF")
				}
			})
			if addr == "" {
				t.Skip("skipped: no server was started")
			}
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			assert.Error(t, c.Ping(ctx).Err(), "the server outlived its test")
		})
	}
}

// TestStartRedisPolicy: StartRedis follows the Redis policy (an unset
// TTLKIT_TEST_REDIS_URL skips, or fails when backends are required), and
// so does a missing redis-server.
func TestStartRedisPolicy(t *testing.T) {
	checkStartPolicy(t, testenv.EnvRedis, "redis://127.0.0.1:6379/0", func(t testing.TB) { redistest.StartRedis(t, redistest.RedisServerOptions{}) })
}

// TestStartRedisClusterPolicy: StartRedisCluster runs only when
// TTLKIT_TEST_REDIS_CLUSTER is set, and a missing redis-server or
// redis-cli skips, or fails when backends are required.
func TestStartRedisClusterPolicy(t *testing.T) {
	checkStartPolicy(t, testenv.EnvRedisCluster, "127.0.0.1:7000", func(t testing.TB) { redistest.StartRedisCluster(t, redistest.ClusterServerOptions{}) })
}

// checkStartPolicy checks that start, with env unset, skips or fails when
// backends are required, and with env set to value but no redis-server on
// the PATH, fails or skips likewise.
func checkStartPolicy(t *testing.T, env, value string, start func(testing.TB)) {
	t.Setenv(env, "")
	t.Setenv(testenv.EnvRequire, "")
	r := run(t, start)
	assert.True(t, r.skipped, "want skip, got %q", r.msg)
	assert.Contains(t, r.msg, env+" is not set")
	t.Setenv(testenv.EnvRequire, "1")
	r = run(t, start)
	assert.True(t, r.failed, "want failure, got %q", r.msg)

	t.Setenv(env, value)
	t.Setenv("PATH", t.TempDir())
	r = run(t, start)
	assert.True(t, r.failed, "want failure, got %q", r.msg)
	assert.Contains(t, r.msg, "redis-server is not on PATH")
	t.Setenv(testenv.EnvRequire, "")
	r = run(t, start)
	assert.True(t, r.skipped, "want skip, got %q", r.msg)
}

// TestSchedDelay: a process stopped for 200 ms (SIGSTOP, then SIGCONT)
// shows a delay at least that long.
func TestSchedDelay(t *testing.T) {
	delay := testenv.SchedDelay(t)
	time.Sleep(50 * time.Millisecond) // a few measurements
	before := delay()
	pid := strconv.Itoa(os.Getpid())
	require.NoError(t, exec.Command("sh", "-c", "kill -STOP "+pid+"; sleep 0.2; kill -CONT "+pid).Run())
	assert.Eventually(t, func() bool { return delay() >= 150*time.Millisecond }, 5*time.Second, 5*time.Millisecond,
		"measured %v (before the stop: %v)", delay(), before)
}

// TestPrivatePostgresRestarts: a private server keeps its committed rows
// across a crash and a restart, and its clients reconnect.
func TestPrivatePostgresRestarts(t *testing.T) {
	srv := pgtest.StartPostgres(t)
	pool := srv.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	require.NoError(t, err)
	srv.Restart(100 * time.Millisecond)
	var v int
	require.Eventually(t, func() bool { return pool.QueryRow(ctx, "SELECT v FROM kept").Scan(&v) == nil }, 30*time.Second, 50*time.Millisecond)
	assert.Equal(t, 42, v)
}
