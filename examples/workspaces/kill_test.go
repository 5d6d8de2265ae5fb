package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
)

// Environment of a controller process a test kills, inherited by the
// workspace servers it starts (see TestMain): its servers never listen
// (a start lasts until its timeout), or ignore SIGTERM (a stop lasts the
// stop grace, 5 s).
const (
	envTestHangStart  = "WORKSPACES_TEST_HANG_START"
	envTestIgnoreTerm = "WORKSPACES_TEST_IGNORE_TERM"
)

// TestControllerKilledMidOperation: a controller killed with SIGKILL in
// the middle of a start or of a stop leaves the workspace's operation set
// and a server process behind it; another controller takes the operation
// over once the dead one's claim has lapsed, finishes it, and stops the
// server no route leads to. No manual reset, no stuck operation, no
// process left over.
func TestControllerKilledMidOperation(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		op, phase string
	}{
		{"start", envTestHangStart, catalog.OpStarting, catalog.Running},
		{"stop", envTestIgnoreTerm, catalog.OpStopping, catalog.Standby},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := pgtest.OpenPostgres(t)
			store := seedStore(t, pg)
			cat := catalog.New(store, nil)
			cfg := backendConfig(t, "controller", pg, "", "")
			cfg.ClaimGrace = 2 * time.Second
			cfg.ReconcileInterval = 200 * time.Millisecond
			ctx := context.Background()
			const id = "ws-k"
			_, err := cat.Create(ctx, id)
			require.NoError(t, err)
			_, err = cat.AskRun(ctx, id)
			require.NoError(t, err)

			victim := startController(t, cfg, tc.env+"=1")
			if tc.name == "stop" {
				waitPhase(t, store, id, catalog.Running, 30*time.Second)
				// Idle past the standby TTL, then the runner's decision.
				time.Sleep(cfg.Standby + 100*time.Millisecond)
				_, err := store.Update(ctx, id, entities.Update{DesiredState: catalog.Standby})
				require.NoError(t, err)
			}
			waitOperation(t, store, id, tc.op, 30*time.Second)
			require.Eventually(t, func() bool { return len(servers(t, cfg.DataDir, id)) == 1 }, 30*time.Second, 10*time.Millisecond,
				"the operation's server process")
			require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
			_ = victim.Wait()
			killed := time.Now()
			assert.Equal(t, tc.op, entity(t, store, id).Operation, "the dead controller left its operation")

			taker := startSystem(t, cfg, Deps{})
			e := waitPhase(t, store, id, tc.phase, cfg.ClaimGrace+30*time.Second)
			t.Logf("%s taken over and finished %v after the kill", tc.op, time.Since(killed).Round(time.Millisecond))
			assert.EqualValues(t, 1, taker.controller.Stats().TakenOver)
			assert.Empty(t, e.Operation)
			want := 0
			if tc.phase == catalog.Running {
				want = 1
				assert.True(t, taker.host.Alive(ctx, id), "the new server answers")
			}
			assert.Len(t, servers(t, cfg.DataDir, id), want, "the dead controller's server was stopped")
		})
	}
}

// startController runs this test binary as "workspaces controller" on cfg's
// table, with env added, and returns it once it serves.
func startController(t *testing.T, cfg Config, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "controller", "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+cfg.PostgresURL, "WORKSPACES_DIR="+cfg.DataDir,
		"WORKSPACES_SECRET="+testSecret, "ADMIN_TOKEN="+testAdmin, "LOG_LEVEL=debug",
		"TTL_STANDBY_SECONDS="+secs(cfg.Standby), "TTL_ARCHIVE_SECONDS="+secs(cfg.Archive),
		"ACTIVITY_FLUSH_INTERVAL="+secs(cfg.FlushInterval), "COORDINATOR_TTL_INTERVAL="+secs(cfg.TickInterval),
		"RECONCILE_INTERVAL_SECONDS="+secs(cfg.ReconcileInterval), "CLAIM_GRACE_SECONDS="+secs(cfg.ClaimGrace))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = testWriter{t}
	// Its workspace servers hold its stderr open after it is killed.
	cmd.WaitDelay = time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, pid := range servers(t, cfg.DataDir, "") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// waitOperation waits until workspace id's row shows operation op.
func waitOperation(t *testing.T, st entities.Store, id, op string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return entity(t, st, id).Operation == op }, within, 5*time.Millisecond,
		"workspace %s never showed operation %s", id, op)
}

// servers returns the pids of the live workspace server processes of
// workspace id ("": any) under data directory dir.
func servers(t *testing.T, dir, id string) []int {
	t.Helper()
	files := []byte(filepath.Join(dir, "files", id))
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var pids []int
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte("\x00workspace\x00")) || !bytes.Contains(cmdline, files) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil {
			continue
		}
		if _, after, _ := bytes.Cut(stat, []byte(") ")); len(after) > 0 && after[0] == 'Z' {
			continue // exited, not yet reaped
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}

// TestPostgresRestart: PostgreSQL crashes (immediate shutdown) and comes
// back a second later, under traffic. Running workspaces keep serving
// meanwhile (a proxy needs the table only to wake a sleeping one); the
// runner's ticks fail and resume, the activity buffered in Redis reaches
// the table once it answers; no workspace in use goes to STANDBY, no
// operation is left stuck, and the idle ones are decided late by the
// outage at most.
func TestPostgresRestart(t *testing.T) {
	delay := testenv.SchedDelay(t)
	srv := pgtest.StartPostgres(t)
	rd := redistest.OpenRedis(t)
	store, err := pgentities.New(srv.Pool(t), pgttl.Options{Table: "workspaces", LastActivityColumn: "last_access_at", NoOperation: "NONE"})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(context.Background()))
	fake := newFakeHost(t, backend(t), 0)
	var dec decisions
	cfg := fastConfig(t)
	cfg.PostgresURL, cfg.RedisURL, cfg.RedisKey = srv.URL(), os.Getenv(testenv.EnvRedis), rd.Prefix+"codehub:activity"
	cfg.Standby = 3 * time.Second
	cfg.Archive = time.Hour
	sys := startSystem(t, cfg, Deps{Runtime: fake, Routes: fake, Wake: dec.wake})
	base := "http://" + sys.Addr()

	active, idle := runningWorkspaces(t, store, fake, time.Now(), 20, 5, 200*time.Millisecond)

	stop := make(chan struct{})
	wg := traffic(t, ownersOf(t, sys, base, active), []string{base}, 200*time.Millisecond, stop)
	time.Sleep(time.Second)
	failedBefore := sys.runner.Stats().SyncErrors
	const down = time.Second
	srv.Restart(down)
	up := time.Now()
	var caughtUp time.Duration
	require.Eventually(t, func() bool {
		for _, id := range active {
			e, err := store.Get(context.Background(), id)
			if err != nil || e.LastActivityAt.Before(up) {
				return false
			}
		}
		caughtUp = time.Since(up)
		return true
	}, 15*time.Second, 20*time.Millisecond)
	t.Logf("activity of every active workspace in the table %v after PostgreSQL answered", caughtUp)
	time.Sleep(cfg.Standby + time.Second)
	close(stop)
	wg.Wait()

	assert.Greater(t, sys.runner.Stats().SyncErrors, failedBefore, "the runner's ticks failed during the outage")
	for _, id := range active {
		assert.Empty(t, dec.of(id), "%s was in use: never decided idle", id)
		assert.Empty(t, fake.opsOf(id), "%s was never stopped", id)
	}
	idleOnTime(t, store, &dec, idle, cfg.Standby, down+3*time.Second, func() (time.Duration, string) {
		return 3 * delay(), fmt.Sprintf("3 × the worst scheduling delay, %v", delay())
	})
	stuck, err := store.List(context.Background(), entities.Filter{Limit: 100})
	require.NoError(t, err)
	for _, e := range stuck {
		assert.Empty(t, e.Operation, "%s: no operation left", e.ID)
	}
	assert.Empty(t, fake.overlapping())
}

// TestRunnerProcessKilled: the TTL runner, a process of its own, is killed
// with SIGKILL again and again while a proxy records activity on 100
// workspaces in use and 10 go idle, each time a little later in its tick
// cycle, and started again. A runner keeps nothing of its own: what it
// drained from Redis but had not yet written stays in Redis until a
// runner writes it. No workspace in use goes to STANDBY, each idle one
// goes no earlier than its TTL, and nothing is left half done.
func TestRunnerProcessKilled(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	rd := redistest.OpenRedis(t)
	redisURL := os.Getenv(testenv.EnvRedis)
	key := rd.Prefix + "codehub:activity"
	store := seedStore(t, pg)
	fake := newFakeHost(t, backend(t), 0)
	cfg := backendConfig(t, "proxy", pg, redisURL, key)
	cfg.Standby = 3 * time.Second
	cfg.Archive = time.Hour
	px := startSystem(t, cfg, Deps{Runtime: fake, Routes: fake})
	ctrlCfg := cfg
	ctrlCfg.Component = "controller"
	ctrl := startSystem(t, ctrlCfg, Deps{Runtime: fake, Routes: fake})
	base := "http://" + px.Addr()

	active, idle := runningWorkspaces(t, store, fake, time.Now(), 100, 10, 0)
	stop := make(chan struct{})
	wg := traffic(t, ownersOf(t, px, base, active), []string{base}, 300*time.Millisecond, stop)

	runner := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "runner", "-addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+cfg.PostgresURL, "REDIS_URL="+redisURL, "ACTIVITY_KEY="+key,
			"WORKSPACES_DIR="+cfg.DataDir, "WORKSPACES_SECRET="+testSecret, "ADMIN_TOKEN="+testAdmin,
			"TTL_STANDBY_SECONDS="+secs(cfg.Standby), "TTL_ARCHIVE_SECONDS=3600",
			"ACTIVITY_FLUSH_INTERVAL="+secs(cfg.FlushInterval), "COORDINATOR_TTL_INTERVAL="+secs(cfg.TickInterval))
		cmd.Stderr = testWriter{t}
		cmd.WaitDelay = time.Second
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	// Kill it 8 times, each life 37 ms longer than the one before: the
	// kills fall at every point of a 100 ms tick cycle.
	for i := range 8 {
		r := runner()
		time.Sleep(400*time.Millisecond + time.Duration(i)*37*time.Millisecond)
		require.NoError(t, r.Process.Signal(syscall.SIGKILL))
		_ = r.Wait()
	}
	runner() // the last one lives
	for _, id := range idle {
		waitPhase(t, store, id, catalog.Standby, 30*time.Second)
	}
	time.Sleep(cfg.Standby)
	close(stop)
	wg.Wait()

	// In use, none went to STANDBY. (On a loaded machine a request may
	// come later than the TTL after the one before, and the runner then
	// rightly decides STANDBY; the request that follows keeps it RUNNING,
	// as the controller checks the activity since the decision.)
	for _, id := range active {
		e := entity(t, store, id)
		assert.Equal(t, catalog.Running, e.Phase, "%s was in use", id)
		assert.Empty(t, fake.opsOf(id), "%s was never stopped", id)
	}
	t.Logf("%d decisions on workspaces in use were found late and cleared by the controller", ctrl.controller.Stats().Kept)
	for _, id := range idle {
		e := entity(t, store, id)
		assert.Greater(t, e.PhaseChangedAt.Sub(e.LastActivityAt), cfg.Standby, "%s: never before the TTL", id)
		assert.Empty(t, e.Operation, id)
	}
	assert.Empty(t, fake.overlapping())
}
