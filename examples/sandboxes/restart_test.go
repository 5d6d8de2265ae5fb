package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/backend"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool/redispool"
)

// liveWatch samples, throughout a test, which live sandboxes hold which
// conversation's files (the file "who" each conversation writes first, read
// in the sandbox's work directory), and records every moment a
// conversation had two.
type liveWatch struct {
	e       env
	stop    chan struct{}
	done    sync.WaitGroup
	samples atomic.Int64
	mu      sync.Mutex
	twice   []string
}

func watchLive(t *testing.T, e env) *liveWatch {
	w := &liveWatch{e: e, stop: make(chan struct{})}
	w.done.Go(func() {
		for {
			byConv := map[string][]string{}
			for _, id := range e.listed(t) {
				b, err := os.ReadFile(filepath.Join(e.work, id, "who"))
				if err == nil {
					conv := strings.TrimSpace(string(b))
					byConv[conv] = append(byConv[conv], id)
				}
			}
			for conv, ids := range byConv {
				if len(ids) > 1 {
					w.mu.Lock()
					w.twice = append(w.twice, fmt.Sprintf("%s in %v", conv, ids))
					w.mu.Unlock()
				}
			}
			w.samples.Add(1)
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return w
}

// end stops the sampling and returns the moments a conversation had two
// live sandboxes.
func (w *liveWatch) end() []string {
	close(w.stop)
	w.done.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.twice
}

// Redis restarted empty while two instances (processes of their own) serve
// conversations under load, one with a long exec in flight: every
// assignment, entity, lock, warm pool record and key is gone at once while
// the sandboxes run. Each conversation goes on in the sandbox it had
// (found again by its owner and adopted: never a second one), with the
// files archived by an earlier TTL cycle, the files written only in the
// live sandbox and every append a 200 acknowledged; and nothing is left
// running that the new Redis does not know.
func TestRedisRestartEmpty(t *testing.T) {
	srv := redistest.StartRedis(t, redistest.RedisServerOptions{})
	rc := srv.Client(t)
	const prefix = "sbrestart"
	inv, err := redispool.New(rc, redispool.Options{Prefix: prefix + ":warm"})
	require.NoError(t, err)
	recs := backend.NewRedisAssignments(rc, prefix)
	e := newEnv(t)
	args := e.args("-redis", srv.URL(), "-prefix", prefix, "-inactivity-ttl", "4s", "-absolute-ttl", "10m",
		"-exec-timeout", "3s", "-gc-interval", "200ms", "-grace", "1s", "-orphan-grace", "3s",
		"-health-interval", "500ms", "-assign-timeout", "5s",
		// SIGTERM at the end waits for what is in flight: on a loaded
		// machine longer than the 3 s exec timeout plus the grace.
		"-drain-timeout", "30s")
	a := startProc(t, append(args, "-instance", "a")...)
	b := startProc(t, append(args, "-instance", "b")...)
	ins := []*instance{a, b}
	live := watchLive(t, e)
	ctx := context.Background()

	// Every conversation's files of an earlier sandbox are archived by
	// the inactivity TTL, and restored into its current one, where it
	// writes more.
	const convs = 8
	names := make([]string, convs)
	first := map[string]string{}
	for i := range names {
		names[i] = fmt.Sprintf("r-%02d", i)
		_, sb, err := runIn(t, ins[i%2], names[i], "echo "+names[i]+" > who; echo archived > a.txt")
		require.NoError(t, err)
		first[names[i]] = sb
	}
	for i, conv := range names {
		require.Eventually(t, func() bool {
			_, st := ins[i%2].state(t, conv)
			return st["status"] == "archived"
		}, 30*time.Second, 50*time.Millisecond, "%s is archived after the inactivity TTL", conv)
	}
	sandboxes := map[string]string{}
	for i, conv := range names {
		out, sb, err := runIn(t, ins[(i+1)%2], conv, "cat a.txt; echo live > b.txt")
		require.NoError(t, err)
		assert.Equal(t, "archived", out, "%s's archived files are restored", conv)
		assert.NotEqual(t, first[conv], sb)
		sandboxes[conv] = sb
	}

	// Load on every conversation through both instances: each request
	// appends its number to the log; the numbers a 200 acknowledged must
	// all be there at the end.
	var restarted atomic.Bool
	type tally struct {
		mu        sync.Mutex
		acked     []int
		after     map[*instance]int // 200s since the restart, by instance
		failed    int
		wrongSB   []string
		lastError string
	}
	tallies := map[string]*tally{}
	for _, conv := range names {
		tallies[conv] = &tally{after: map[*instance]int{}}
	}
	stop := make(chan struct{})
	var load sync.WaitGroup
	for i, conv := range names {
		tl := tallies[conv]
		load.Go(func() {
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				in := ins[(i+n)%2]
				after := restarted.Load()
				r, err := tryCall("POST", in.url("/conversations/"+conv+"/exec"),
					execBody(0, "sh", "-c", fmt.Sprintf("echo %d >> log; pwd", n)))
				tl.mu.Lock()
				if err == nil && r.status == http.StatusOK {
					tl.acked = append(tl.acked, n)
					if after {
						tl.after[in]++
					}
					if sb := filepath.Base(strings.TrimSpace(r.exec(t).Stdout)); sb != sandboxes[conv] {
						tl.wrongSB = append(tl.wrongSB, sb)
					}
				} else {
					tl.failed++
					tl.lastError = fmt.Sprint(r, err)
				}
				tl.mu.Unlock()
				if err != nil || r.status != http.StatusOK {
					time.Sleep(50 * time.Millisecond) // a client's pause before it retries
				}
			}
		})
	}
	ackedAtLeast := func(n int) bool {
		for _, tl := range tallies {
			tl.mu.Lock()
			k := len(tl.acked)
			tl.mu.Unlock()
			if k < n {
				return false
			}
		}
		return true
	}
	require.Eventually(t, func() bool { return ackedAtLeast(3) }, 30*time.Second, 20*time.Millisecond)

	// A long exec is in flight on r-00 when Redis goes.
	long := make(chan reply, 1)
	go func() {
		r, _ := tryCall("POST", a.url("/conversations/r-00/exec"), execBody(0, "sh", "-c", "sleep 2; echo long > long.txt"))
		long <- r
	}()
	require.Eventually(t, func() bool { rec, ok, err := recs.Get(ctx, "r-00"); return err == nil && ok && rec.InFlight > 0 },
		10*time.Second, 10*time.Millisecond)
	warmBefore, err := inv.Records(ctx)
	require.NoError(t, err)

	srv.Restart(0)
	restarted.Store(true)
	keys, err := rc.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	t.Logf("restarted Redis empty (%d keys under the prefix just after); %d warm sandboxes were recorded before", len(keys), len(warmBefore))

	// Every conversation is served again, through both instances.
	require.Eventually(t, func() bool {
		for _, tl := range tallies {
			tl.mu.Lock()
			ok := tl.after[a] >= 3 && tl.after[b] >= 3
			tl.mu.Unlock()
			if !ok {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "every conversation is served through both instances after the restart")
	if r := <-long; r.status == http.StatusOK {
		t.Logf("the long exec in flight during the restart was acknowledged")
	} else {
		t.Logf("the long exec in flight during the restart failed: %s", r)
	}

	// Nothing runs that the new Redis does not know: each live sandbox is
	// a conversation's (its record) or in the shared warm pool.
	var untracked []string
	require.Eventually(t, func() bool {
		known := map[string]bool{}
		warm, err := inv.Records(ctx)
		if err != nil {
			return false
		}
		for _, r := range warm {
			known[r.ID] = true
		}
		for _, conv := range names {
			rec, ok, err := recs.Get(ctx, conv)
			if err != nil || !ok {
				return false
			}
			known[rec.Sandbox.ID] = true
		}
		untracked = untracked[:0]
		for _, id := range e.listed(t) {
			if !known[id] {
				untracked = append(untracked, id)
			}
		}
		return len(untracked) == 0
	}, 30*time.Second, 100*time.Millisecond, "sandboxes nothing tracks: %v", &untracked)
	close(stop)
	load.Wait()

	// Each conversation kept its sandbox and every file it had.
	for _, conv := range names {
		tl := tallies[conv]
		rec, ok, err := recs.Get(ctx, conv)
		require.NoError(t, err)
		require.True(t, ok, "%s has a record in the new Redis", conv)
		assert.Equal(t, sandboxes[conv], rec.Sandbox.ID, "%s's record names the sandbox it had", conv)
		assert.Empty(t, tl.wrongSB, "%s was served by another sandbox than its own", conv)
		out, sb, err := runIn(t, b, conv, "cat who a.txt b.txt; echo ---; cat log")
		require.NoError(t, err)
		assert.Equal(t, sandboxes[conv], sb)
		parts := strings.SplitN(out, "\n---\n", 2)
		require.Len(t, parts, 2, "%s: %q", conv, out)
		assert.Equal(t, conv+"\narchived\nlive", parts[0], "%s's archived and live files", conv)
		logged := map[int]bool{}
		for _, l := range strings.Fields(parts[1]) {
			n, _ := strconv.Atoi(l)
			logged[n] = true
		}
		var lost []int
		for _, n := range tl.acked {
			if !logged[n] {
				lost = append(lost, n)
			}
		}
		assert.Empty(t, lost, "%s: acknowledged appends missing from its log", conv)
		t.Logf("%s: %d appends acknowledged (%d through a, %d through b after the restart), %d failed (last: %s)",
			conv, len(tl.acked), tl.after[a], tl.after[b], tl.failed, tl.lastError)
	}
	if out, _, err := runIn(t, a, "r-00", "cat long.txt 2>/dev/null || echo none"); assert.NoError(t, err) {
		t.Logf("r-00's long.txt: %s", out)
	}
	assert.Positive(t, metric(t, ins, "sandboxes_adopted_total"), "the lost assignments were adopted again")
	assert.Zero(t, metric(t, ins, `sandboxes_destroyed_total{reason="stale"}`))

	// A new conversation gets a sandbox of the refilled warm pool.
	_, sb, err := runIn(t, a, "r-new", "echo r-new > who")
	require.NoError(t, err)
	assert.NotContains(t, slices.Collect(func(yield func(string) bool) {
		for _, s := range sandboxes {
			if !yield(s) {
				return
			}
		}
	}), sb)

	twice := live.end()
	assert.Empty(t, twice, "a conversation had two live sandboxes")
	t.Logf("%d samples of the live sandboxes", live.samples.Load())
}
