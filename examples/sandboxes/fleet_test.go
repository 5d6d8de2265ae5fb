package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/redisentities"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool/process"
	"github.com/ttlkit/ttlkit/pool/redispool"
)

// redisArgs opens the test Redis and returns the flags that put two
// instances on it, under the test's own prefix, and the warm pool's
// inventory and the entity store as the instances see them.
func redisArgs(t *testing.T) ([]string, *redispool.Inventory, *redisentities.Store) {
	r := redistest.OpenRedis(t)
	prefix := strings.TrimSuffix(r.Prefix, ":")
	inv, err := redispool.New(r.Client, redispool.Options{Prefix: prefix + ":warm"})
	require.NoError(t, err)
	st, err := redisentities.New(r.Client, redisentities.Options{Prefix: prefix})
	require.NoError(t, err)
	return []string{"-redis", os.Getenv(testenv.EnvRedis), "-prefix", prefix}, inv, st
}

// run runs script in conv's sandbox through in, retrying while the
// sandbox drains (503, as a client honouring Retry-After would), and
// returns the result's stdout and the sandbox's id (the work directory's
// name, which the script must print last with pwd).
func runIn(t *testing.T, in *instance, conv, script string) (out, sandbox string, err error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := tryCall("POST", in.url("/conversations/"+conv+"/exec"), execBody(0, "sh", "-c", script+"; pwd"))
		if err != nil {
			return "", "", err
		}
		if r.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if r.status != http.StatusOK {
			return "", "", fmt.Errorf("%s", r)
		}
		res := r.exec(t)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		return strings.Join(lines[:len(lines)-1], "\n"), filepath.Base(lines[len(lines)-1]), nil
	}
}

// owners records which conversation each sandbox ever served.
type owners struct {
	mu sync.Mutex
	m  map[string]string
}

func (o *owners) saw(t *testing.T, sandbox, conv string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, ok := o.m[sandbox]; ok && prev != conv {
		t.Errorf("sandbox %s served conversations %s and %s", sandbox, prev, conv)
	}
	o.m[sandbox] = conv
}

func metric(t *testing.T, ins []*instance, name string) int {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)`)
	total := 0
	for _, in := range ins {
		if m := re.FindSubmatch(call(t, "GET", in.url("/metrics"), nil).body); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			total += n
		}
	}
	return total
}

// Two backend instances (processes of their own) on one Redis, 20
// conversations executing concurrently through both: each conversation
// always reaches the same sandbox from either instance, no sandbox ever
// serves two conversations, and the shared warm pool stays within its
// bounds and settles at its minimum. Then the idle conversations lose
// their sandboxes after the inactivity TTL and a busy one after the
// absolute TTL, their files archived and restored into the next sandbox.
func TestFleet(t *testing.T) {
	shared, inv, records := redisArgs(t)
	e := newEnv(t)
	// The TTLs leave room for the 20 conversations' first round on a
	// loaded machine with the race detector, where each new sandbox
	// starts two race-instrumented programs (its agent and its first
	// exec's shim): an absolute TTL that passes during the rounds would
	// move a conversation to a new sandbox.
	args := e.args(append(shared, "-inactivity-ttl", "4s", "-absolute-ttl", "15s", "-exec-timeout", "3s",
		"-gc-interval", "200ms", "-grace", "1s", "-orphan-grace", "20s", "-health-interval", "500ms")...)
	a := startProc(t, append(args, "-instance", "a")...)
	b := startProc(t, append(args, "-instance", "b")...)
	ins := []*instance{a, b}
	seen := &owners{m: map[string]string{}}
	ctx := context.Background()

	// The warm pool is sampled throughout.
	var maxIdle atomic.Int64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for {
			if c, err := inv.Counts(ctx); err == nil && int64(c.Idle) > maxIdle.Load() {
				maxIdle.Store(int64(c.Idle))
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	const convs, rounds = 20, 5
	first := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range convs {
		conv := fmt.Sprintf("conv-%02d", i)
		wg.Go(func() {
			for r := range rounds {
				in := ins[(i+r)%2]
				out, sb, err := runIn(t, in, conv, fmt.Sprintf("echo %s-%d >> log; wc -l < log", conv, r))
				if !assert.NoError(t, err) {
					return
				}
				seen.saw(t, sb, conv)
				assert.Equal(t, strconv.Itoa(r+1), strings.TrimSpace(out), "%s round %d: every write reached the same files", conv, r)
				mu.Lock()
				if first[conv] == "" {
					first[conv] = sb
				}
				assert.Equal(t, first[conv], sb, "%s is served by one sandbox from both instances", conv)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())

	// The warm pool refills to its minimum across both instances.
	require.Eventually(t, func() bool {
		c, err := inv.Counts(ctx)
		return err == nil && c.Idle == 2 && c.Reserved == 0
	}, 10*time.Second, 20*time.Millisecond, "the shared warm pool settles at its minimum")

	// One conversation stays busy past the absolute TTL; the others idle
	// out.
	var busySandboxes atomic.Int64
	busyDone := make(chan []string)
	stopBusy := make(chan struct{})
	go func() {
		var sbs []string
		for i := 0; ; i++ {
			select {
			case <-stopBusy:
				busyDone <- sbs
				return
			case <-time.After(200 * time.Millisecond):
			}
			out, sb, err := runIn(t, ins[i%2], "busy", "echo x >> log; wc -l < log")
			if !assert.NoError(t, err) {
				busyDone <- sbs
				return
			}
			seen.saw(t, sb, "busy")
			assert.Equal(t, strconv.Itoa(i+1), strings.TrimSpace(out), "busy: the files survive its sandboxes")
			if len(sbs) == 0 || sbs[len(sbs)-1] != sb {
				sbs = append(sbs, sb)
				busySandboxes.Store(int64(len(sbs)))
			}
		}
	}()

	for i := range convs {
		conv := fmt.Sprintf("conv-%02d", i)
		require.Eventually(t, func() bool {
			_, st := ins[i%2].state(t, conv)
			return st["status"] == "archived"
		}, 20*time.Second, 50*time.Millisecond, "%s is destroyed after the inactivity TTL", conv)
		assert.FileExists(t, filepath.Join(e.archive, conv+".tar"))
		assert.NotContains(t, e.listed(t), first[conv])
	}
	for i := range convs {
		conv := fmt.Sprintf("conv-%02d", i)
		out, sb, err := runIn(t, ins[(i+1)%2], conv, "wc -l < log")
		require.NoError(t, err)
		seen.saw(t, sb, conv)
		assert.NotEqual(t, first[conv], sb)
		assert.Equal(t, strconv.Itoa(rounds), strings.TrimSpace(out), "%s's files are restored into its new sandbox", conv)
	}

	// The busy conversation outlives the absolute TTL of its first sandbox.
	require.Eventually(t, func() bool { return busySandboxes.Load() >= 2 },
		20*time.Second, 50*time.Millisecond, "the busy conversation's sandbox reaches its absolute TTL")
	close(stopBusy)
	sbs := <-busyDone
	assert.GreaterOrEqual(t, len(sbs), 2, "the busy conversation got a new sandbox: %v", sbs)
	assert.Positive(t, metric(t, ins, `sandboxes_destroyed_total{reason="lifetime"}`))
	close(stopSampling)
	sampling.Wait()

	assert.LessOrEqual(t, maxIdle.Load(), int64(10), "the warm pool never held more than its maximum")
	// Each of the 20 went idle; a few may have reached their absolute TTL
	// first (it counts from the warm sandbox's creation).
	inactive := metric(t, ins, `sandboxes_destroyed_total{reason="inactive"}`)
	assert.Positive(t, inactive)
	assert.GreaterOrEqual(t, inactive+metric(t, ins, `sandboxes_destroyed_total{reason="lifetime"}`), convs+1)
	assert.Zero(t, metric(t, ins, `sandboxes_destroy_failures_total`))

	// Redis keeps no record of the destroyed sandboxes.
	all, err := records.List(ctx, entities.Filter{Deleted: true})
	require.NoError(t, err)
	for _, ent := range all {
		assert.True(t, ent.DeletedAt.IsZero(), "%s was destroyed and is still recorded", ent.ID)
	}
	assert.LessOrEqual(t, len(all), convs+1, "at most one live sandbox per conversation")
}

// kill -9 of one instance while both serve: the other serves every
// conversation (the assignments are in Redis) with the same sandboxes and
// files, and nothing is left that nobody knows: what the dead instance
// held and a stray sandbox are reaped as orphans after the grace.
func TestKill9(t *testing.T) {
	shared, inv, _ := redisArgs(t)
	e := newEnv(t)
	args := e.args(append(shared, "-gc-interval", "200ms", "-grace", "1s", "-orphan-grace", "3s", "-health-interval", "500ms",
		"-exec-timeout", "10s", "-assign-timeout", "3s")...)
	a := startProc(t, append(args, "-instance", "a")...)
	b := startProc(t, append(args, "-instance", "b")...)
	ins := []*instance{a, b}

	const convs = 10
	sandboxes := map[string]string{}
	for i := range convs {
		conv := fmt.Sprintf("k-%02d", i)
		_, sb, err := runIn(t, ins[i%2], conv, "echo "+conv+" > who")
		require.NoError(t, err)
		sandboxes[conv] = sb
	}

	// A stray sandbox with the system's label that nobody recorded (as if
	// its creator died before it could).
	stray, err := process.New(process.Options{
		Command: []string{os.Args[0], "agent", "-listen", "{addr}", "-dir", filepath.Join(e.work, "{id}")},
		Label:   e.label,
	})
	require.NoError(t, err)
	w, err := stray.Create(context.Background())
	require.NoError(t, err)

	// Load through both; a long exec is in flight on a when it dies.
	var failedOnA, servedByB atomic.Int64
	long := make(chan error, 1)
	go func() {
		_, err := tryCall("POST", a.url("/conversations/k-00/exec"), execBody(0, "sh", "-c", "sleep 3"))
		long <- err
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var killed atomic.Bool
	for i := range convs {
		conv := fmt.Sprintf("k-%02d", i)
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				in := ins[(i+n)%2]
				if killed.Load() {
					in = b
				}
				out, sb, err := runIn(t, in, conv, "cat who")
				if err != nil {
					if in == a {
						failedOnA.Add(1) // a died under it
						continue
					}
					t.Errorf("%s through b: %v", conv, err)
					return
				}
				if killed.Load() {
					servedByB.Add(1)
				}
				assert.Equal(t, conv, strings.TrimSpace(out))
				assert.Equal(t, sandboxes[conv], sb, "%s keeps its sandbox", conv)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	a.kill()
	killed.Store(true)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	assert.Error(t, <-long, "the exec in flight on a died with it")
	assert.GreaterOrEqual(t, servedByB.Load(), int64(convs), "b served every conversation after a died")

	// Nothing unknown is left: every sandbox still running is assigned to a
	// conversation or in the shared warm pool; the stray one is gone.
	ctx := context.Background()
	require.Eventually(t, func() bool {
		recs, err := inv.Records(ctx)
		if err != nil {
			return false
		}
		known := map[string]bool{}
		for _, r := range recs {
			known[r.ID] = true
		}
		for _, sb := range sandboxes {
			known[sb] = true
		}
		for _, id := range e.listed(t) {
			if !known[id] || id == w.ID {
				return false
			}
		}
		return true
	}, 15*time.Second, 100*time.Millisecond, "the orphans are reaped")
	for conv, sb := range sandboxes {
		assert.Contains(t, e.listed(t), sb, "%s's sandbox lives on", conv)
	}
	require.Eventually(t, func() bool { return metric(t, []*instance{b}, `sandboxes_warm_destroyed_total{reason="orphan"}`) > 0 },
		5*time.Second, 50*time.Millisecond)

	// SIGTERM on b with an exec in flight: the exec finishes, b stops
	// accepting and exits 0, and the sandboxes stay for the next instance.
	inflight := make(chan reply, 1)
	go func() {
		r, _ := tryCall("POST", b.url("/conversations/k-01/exec"), execBody(0, "sh", "-c", "sleep 1; echo done"))
		inflight <- r
	}()
	// The exec is in flight once the record counts it ("running" is the
	// sandbox's status, which an earlier exec already set).
	require.Eventually(t, func() bool {
		_, st := b.state(t, "k-01")
		n, _ := st["in_flight"].(float64)
		return st["status"] == "running" && n >= 1
	}, 5*time.Second, 10*time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- b.stop() }()
	require.Eventually(t, func() bool {
		_, err := tryCall("GET", b.url("/healthz"), nil)
		return err != nil
	}, 5*time.Second, 10*time.Millisecond, "b stops accepting")
	r := <-inflight
	assert.Equal(t, "done\n", r.exec(t).Stdout, "the exec in flight finished")
	require.NoError(t, <-stopped, "b exits 0")
	for conv, sb := range sandboxes {
		assert.Contains(t, e.listed(t), sb, "%s's sandbox is left for the other instances", conv)
	}
	c := startProc(t, append(args, "-instance", "c")...)
	out, sb, err := runIn(t, c, "k-01", "cat who")
	require.NoError(t, err)
	assert.Equal(t, "k-01", out)
	assert.Equal(t, sandboxes["k-01"], sb, "a new instance serves it")
}

// A record that expired while its sandbox lived on (every GC pass failed
// for longer than the record's TTL): the conversation's next request
// destroys that sandbox — archiving its files — before it assigns a new
// one, so nothing written since the last archive is lost and the
// conversation never has two sandboxes.
func TestStaleRecord(t *testing.T) {
	r := redistest.OpenRedis(t)
	prefix := strings.TrimSuffix(r.Prefix, ":")
	e := newEnv(t)
	in := startIn(t, e.args("-redis", os.Getenv(testenv.EnvRedis), "-prefix", prefix)...)
	_, first, err := runIn(t, in, "s1", "echo latest > notes")
	require.NoError(t, err)
	n, err := r.Client.Del(context.Background(), prefix+":container:{s1}").Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the design's key")

	out, second, err := runIn(t, in, "s1", "cat notes")
	require.NoError(t, err)
	assert.Equal(t, "latest", out)
	assert.NotEqual(t, first, second)
	assert.NotContains(t, e.listed(t), first)
	assert.Equal(t, 1, metric(t, []*instance{in}, `sandboxes_destroyed_total{reason="stale"}`))
}

// With the state in Redis and no SANDBOXES_API_KEY, the instances share one
// API key, kept in Redis (<prefix>:api-key) as the agents' token is: each
// prints it, and a client's key works on every instance. A key given to an
// instance is its own, and is not printed. down deletes the shared key.
func TestSharedKey(t *testing.T) {
	r := redistest.OpenRedis(t)
	prefix := strings.TrimSuffix(r.Prefix, ":")
	ctx := context.Background()
	e := newEnv(t)
	args := e.args("-redis", os.Getenv(testenv.EnvRedis), "-prefix", prefix, "-warm-min", "1")
	a := startIn(t, append(args, "-instance", "a")...)
	b := startIn(t, append(args, "-instance", "b")...)
	assert.Equal(t, a.key, b.key, "both printed the same key")
	assert.Contains(t, b.logs.String(), "the instances share one in Redis")
	stored, err := r.Client.Get(ctx, prefix+":api-key").Result()
	require.NoError(t, err)
	assert.Equal(t, a.key, stored)
	for _, in := range []*instance{a, b} {
		res := send(t, request(t, "POST", in.url("/conversations/shared/exec"), execBody(0, "echo", "hi"), "X-Api-Key", a.key)).exec(t)
		assert.Equal(t, "hi\n", res.Stdout)
	}

	c := startIn(t, append(args, "-instance", "c", "-api-key", "c's own key")...)
	assert.NotContains(t, c.logs.String(), "export SANDBOXES_API_KEY", "a key given is not printed")
	refused := send(t, request(t, "POST", c.url("/conversations/shared/exec"), execBody(0, "echo", "hi"), "X-Api-Key", a.key))
	assert.Equal(t, http.StatusForbidden, refused.status, "%s", refused)
	res := send(t, request(t, "POST", c.url("/conversations/shared/exec"), execBody(0, "echo", "hi"), "X-Api-Key", "c's own key")).exec(t)
	assert.Equal(t, "hi\n", res.Stdout)

	for _, in := range []*instance{a, b, c} {
		require.NoError(t, in.stop())
	}
	require.NoError(t, run(ctx, append([]string{"down"}, args...), func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard))
	n, err := r.Client.Exists(ctx, prefix+":api-key").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "down deleted the shared key")
}
