package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// childEnv makes the test binary run the program itself, as main does,
// with the arguments after "--": an instance the test can kill -9.
const childEnv = "CAMERAS_TEST_CHILD"

func runChild() int {
	args := os.Args[1:]
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, args, os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChild starts the program in a process of its own with the
// environment vars and returns its base URL and the process.
func startChild(t *testing.T, vars map[string]string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := regexp.MustCompile(`open (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				lines <- m[1]
			}
		}
	}()
	select {
	case url := <-lines:
		return url, cmd
	case <-time.After(30 * time.Second):
		t.Fatal("the instance did not start")
		return "", nil
	}
}

// TestKillAnInstance: two instances on one store, users holding modals on
// both; the first is killed with SIGKILL. Its leases, no longer
// heartbeated, are gone from the store within the heartbeat grace (and a
// cleanup interval) of their last heartbeat; the budget, read from the
// store all along, is never exceeded; and the other instance keeps
// granting, at once and then the whole budget once the dead instance's
// units are free.
func TestKillAnInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("processes and real stores")
	}
	for _, sc := range []struct {
		name string
		vars func(t *testing.T) map[string]string
	}{
		{"mysql", func(t *testing.T) map[string]string {
			return map[string]string{"STORE": "mysql", "STORE_DSN": mysqltest.OpenMySQL(t).DSN}
		}},
		{"postgres", func(t *testing.T) map[string]string {
			return map[string]string{"STORE": "postgres", "STORE_DSN": pgtest.OpenPostgres(t).URL()}
		}},
		{"redis", func(t *testing.T) map[string]string {
			r := redistest.OpenRedis(t)
			return map[string]string{"STORE": "redis", "STORE_DSN": os.Getenv("TTLKIT_TEST_REDIS_URL"), "REDIS_PREFIX": r.Prefix + "{cams}:"}
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			const grace, cleanup = 2 * time.Second, time.Second
			vars := sc.vars(t)
			vars["SESSION_KEY"] = testKey
			vars["HEARTBEAT_INTERVAL_SEC"] = "0.5"
			vars["HEARTBEAT_GRACE_SEC"] = "2"
			vars["LEASE_CLEANUP_SEC"] = "1"
			// The machine's own load must not close the gate: the test is
			// about the budget.
			vars["CPU_TRIP_PERCENT"], vars["CPU_WARN_PERCENT"], vars["CPU_RECOVER_PERCENT"] = "1000", "1000", "999"
			vars["MEMORY_TRIP_PERCENT"], vars["MEMORY_WARN_PERCENT"], vars["MEMORY_RECOVER_PERCENT"] = "1000", "1000", "999"
			vars["SWAP_TRIP_MB"], vars["SWAP_WARN_MB"], vars["SWAP_RECOVER_MB"] = "1e9", "1e9", "1e8"
			urlA, procA := startChild(t, vars)
			urlB, stopB := startRun(t, nil, vars)

			// The auditor reads the store through B all along.
			ctx, stopAudit := context.WithCancel(context.Background())
			var overBudget, audits atomic.Int64
			var wg sync.WaitGroup
			t.Cleanup(func() { stopAudit(); wg.Wait() }) // before B stops
			wg.Go(func() {
				auditor := overHTTP(t, urlB)
				for ctx.Err() == nil {
					s := auditor.status()
					if s.Status == http.StatusOK {
						audits.Add(1)
						if r, ok := s.Body["modal_budget_remaining"].(float64); ok && r < 0 {
							overBudget.Add(1)
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
			})

			// 10 users with a main stream (2 units each) on A, 5 on B: 30
			// of the 35 units.
			var onA, onB []*user
			var idsA, idsB []string
			for i := range 15 {
				u := overHTTP(t, urlA)
				if i >= 10 {
					u = overHTTP(t, urlB)
				}
				id := u.mustGrant(fmt.Sprintf("cam_1f_0%d", 1+i%4), "main")
				if i < 10 {
					onA, idsA = append(onA, u), append(idsA, id)
				} else {
					onB, idsB = append(onB, u), append(idsB, id)
				}
			}
			// B's users keep heartbeating; A's do once more, then A dies.
			wg.Go(func() {
				for ctx.Err() == nil {
					for i, u := range onB {
						if hb := u.heartbeat(idsB[i]); hb.Status != http.StatusOK {
							t.Errorf("heartbeat on B: %d %v", hb.Status, hb.Body)
						}
					}
					time.Sleep(400 * time.Millisecond)
				}
			})
			var lastA time.Time // when the last heartbeat on A was sent
			for i, u := range onA {
				lastA = time.Now()
				require.Equal(t, http.StatusOK, u.heartbeat(idsA[i]).Status)
			}
			require.NoError(t, procA.Process.Signal(syscall.SIGKILL))
			_ = procA.Wait()

			// B grants at once from the units left.
			newcomer := overHTTP(t, urlB)
			a := newcomer.grant("cam_2f_19", "main")
			require.Equal(t, http.StatusCreated, a.Status, "B grants while A's leases are still live: %v", a.Body)
			require.Equal(t, http.StatusOK, newcomer.release(a.str("lease_id")).Status)

			// A's leases lapse within the grace (and a cleanup) of their
			// last heartbeat: only B's remain.
			var gone time.Duration
			require.Eventually(t, func() bool {
				s := overHTTP(t, urlB).status()
				if n, _ := s.Body["active_modals"].(float64); int(n) == len(onB) {
					gone = time.Since(lastA)
					return true
				}
				return false
			}, grace+cleanup+30*time.Second, 20*time.Millisecond)
			t.Logf("%s: the killed instance's %d leases were gone %v after their last heartbeat (grace %v, cleanup every %v)",
				sc.name, len(idsA), gone, grace, cleanup)
			assert.GreaterOrEqual(t, gone, grace, "a lease lapsed before its grace")
			assert.LessOrEqual(t, gone, grace+cleanup+2*time.Second, "the killed instance's leases outlived grace and a cleanup (with a second's slack)")

			// Then B grants the whole budget again: B's 5 main streams, 12
			// more and a sub stream make 35 units; one more is refused.
			for i := range 12 {
				overHTTP(t, urlB).mustGrant(fmt.Sprintf("cam_1f_0%d", 1+i%4), "main")
			}
			overHTTP(t, urlB).mustGrant("cam_1f_01", "sub")
			requireRefusal(t, overHTTP(t, urlB).grant("cam_1f_02", "sub"), http.StatusTooManyRequests, CodeOverCapacity, MsgOverCapacity)

			stopAudit()
			wg.Wait()
			t.Logf("%s: %d audits", sc.name, audits.Load())
			assert.Positive(t, audits.Load())
			assert.Zero(t, overBudget.Load(), "the budget was exceeded")
			require.NoError(t, stopB())
		})
	}
}
