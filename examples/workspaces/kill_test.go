package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/ttl"
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
				_, err := store.Update(ctx, id, ttl.Update{DesiredState: catalog.Standby})
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
func waitOperation(t *testing.T, st ttl.Store, id, op string, within time.Duration) {
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
