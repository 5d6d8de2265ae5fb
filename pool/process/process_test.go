//go:build linux

package process_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/process"
	"github.com/ttlkit/ttlkit/pool/provisionertest"
)

// The test binary doubles as the worker program and as an owner that
// crashes: role is PROCESS_TEST_ROLE.
const roleEnv = "PROCESS_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		leakcheck.VerifyTestMain(m)
	case "worker":
		worker(os.Args[1], os.Getenv("IGNORE_TERM") == "1", os.Getenv("SPAWN") == "1")
	case "owner":
		owner()
	case "never-ready":
		time.Sleep(time.Hour)
	case "exit":
		os.Exit(3)
	}
	os.Exit(0)
}

// worker serves TCP on addr until SIGTERM (unless ignoreTerm). With spawn
// it starts a grandchild first, which a stop must reach too.
func worker(addr string, ignoreTerm, spawn bool) {
	sig := make(chan os.Signal, 1)
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sig, syscall.SIGTERM)
	}
	if spawn {
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), roleEnv+"=never-ready")
		if err := c.Start(); err != nil {
			os.Exit(4)
		}
		fmt.Fprintf(os.Stdout, "grandchild %d\n", c.Process.Pid)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(5)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	<-sig
}

// owner creates workers, prints their ids, then waits to be killed.
func owner() {
	n, _ := strconv.Atoi(os.Getenv("OWNER_N"))
	p, err := process.New(workerOptions(os.Getenv("OWNER_LABEL")))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for range n {
		w, err := p.Create(context.Background())
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("worker", w.ID)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

func workerOptions(label string) process.Options {
	return process.Options{
		Command:      []string{os.Args[0], "{addr}"},
		Env:          []string{roleEnv + "=worker", "WORKER_ID={id}"},
		Label:        label,
		StopGrace:    2 * time.Second,
		ReadyOptions: probe.Options{Timeout: 10 * time.Second},
	}
}

var labels int

func newLabel(t *testing.T) string {
	labels++
	return fmt.Sprintf("test-%d-%d", os.Getpid(), labels)
}

// newProvisioner returns a provisioner and, at cleanup, destroys every
// worker of its label that is still running.
func newProvisioner(t *testing.T, opts process.Options) *process.Provisioner {
	p, err := process.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		items, err := p.List(context.Background())
		require.NoError(t, err)
		for _, it := range items {
			_ = p.Destroy(context.Background(), it.Value)
		}
	})
	return p
}

func TestContract(t *testing.T) {
	label := newLabel(t)
	provisionertest.Run(t, provisionertest.Harness[process.Worker]{
		New: func(t *testing.T) provisionertest.Provisioner[process.Worker] {
			return newProvisioner(t, workerOptions(label))
		},
		Kill: func(t *testing.T, w process.Worker) {
			require.NoError(t, syscall.Kill(w.PID, syscall.SIGKILL))
		},
		CrashOwner: func(t *testing.T, n int) []string {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), roleEnv+"=owner", "OWNER_LABEL="+label, "OWNER_N="+strconv.Itoa(n))
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			var ids []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 2 && f[0] == "worker" {
					ids = append(ids, f[1])
				} else if f[0] == "ready" {
					break
				} else {
					t.Fatalf("owner: %s", sc.Text())
				}
			}
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
			_ = cmd.Wait()
			return ids
		},
	})
}

func TestWorkerGetsItsPortAndEnv(t *testing.T) {
	p := newProvisioner(t, workerOptions(newLabel(t)))
	w, err := p.Create(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(w.Port), w.Addr)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.PID))
	require.NoError(t, err)
	assert.Contains(t, string(env), "WORKER_ID="+w.ID+"\x00")
	require.NoError(t, probe.Once(context.Background(), probe.TCP(w.Addr), time.Second))
	require.NoError(t, p.Destroy(context.Background(), w))
	assert.Error(t, probe.Once(context.Background(), probe.TCP(w.Addr), time.Second), "the worker still listens after Destroy")
}

// List gives a worker's start to the hundredth of a second (its clock
// tick), not to the second: an orphan's grace period depends on it.
func TestListedCreatedIsPrecise(t *testing.T) {
	p := newProvisioner(t, workerOptions(newLabel(t)))
	w, err := p.Create(context.Background())
	require.NoError(t, err)
	items, err := p.List(context.Background())
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.WithinDuration(t, w.Created, items[0].Created, 50*time.Millisecond)
	assert.Equal(t, items[0].Created, items[0].Value.Created)
	require.NoError(t, p.Destroy(context.Background(), w))
}

func TestExitBeforeReadyFailsAtOnce(t *testing.T) {
	opts := workerOptions(newLabel(t))
	opts.Env = []string{roleEnv + "=exit"}
	opts.ReadyOptions.Timeout = time.Minute
	p := newProvisioner(t, opts)
	start := time.Now()
	_, err := p.Create(context.Background())
	require.ErrorIs(t, err, process.ErrExited)
	assert.Contains(t, err.Error(), "exit status 3")
	assert.Less(t, time.Since(start), 30*time.Second, "Create waited for the readiness timeout although the worker had exited")
	items, err := p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items)
}

func TestNeverReadyIsKilled(t *testing.T) {
	opts := workerOptions(newLabel(t))
	opts.Env = []string{roleEnv + "=never-ready"}
	opts.ReadyOptions.Timeout = 300 * time.Millisecond
	p := newProvisioner(t, opts)
	_, err := p.Create(context.Background())
	require.ErrorIs(t, err, probe.ErrNotReady)
	items, err := p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items, "a worker that never became ready was left running")

	// The same when the caller gives up first.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	opts.ReadyOptions.Timeout = time.Minute
	p = newProvisioner(t, opts)
	_, err = p.Create(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	items, err = p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items, "a cancelled Create left its worker running")
}

func TestStopReachesTheWholeGroupAndKillsAfterGrace(t *testing.T) {
	opts := workerOptions(newLabel(t))
	opts.Env = append(opts.Env, "IGNORE_TERM=1", "SPAWN=1")
	opts.StopGrace = 200 * time.Millisecond
	r, wr, err := os.Pipe()
	require.NoError(t, err)
	opts.Stdout = wr
	p := newProvisioner(t, opts)
	w, err := p.Create(context.Background())
	require.NoError(t, err)
	require.NoError(t, wr.Close())
	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	gc, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "grandchild ")))
	require.NoError(t, err)

	start := time.Now()
	require.NoError(t, p.Destroy(context.Background(), w))
	assert.GreaterOrEqual(t, time.Since(start), opts.StopGrace, "a worker that ignores SIGTERM was killed before its grace")
	assert.False(t, alive(gc), "the worker's own child survived Destroy")
}

func TestCheckSeesAnExitAtOnce(t *testing.T) {
	p := newProvisioner(t, workerOptions(newLabel(t)))
	w, err := p.Create(context.Background())
	require.NoError(t, err)
	require.NoError(t, p.Check(context.Background(), w))
	require.NoError(t, syscall.Kill(w.PID, syscall.SIGTERM))
	require.Eventually(t, func() bool {
		return errors.Is(p.Check(context.Background(), w), process.ErrExited)
	}, 10*time.Second, 5*time.Millisecond)
}

func TestPidReuseIsNeverSignalled(t *testing.T) {
	p := newProvisioner(t, workerOptions(newLabel(t)))
	// A worker record whose pid is a process that is not that worker.
	sleeper := exec.Command("sleep", "30")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, sleeper.Start())
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	require.NoError(t, p.Destroy(context.Background(), process.Worker{ID: "gone", PID: sleeper.Process.Pid}))
	assert.True(t, alive(sleeper.Process.Pid), "Destroy signalled a process that is not its worker")
	assert.ErrorIs(t, p.Check(context.Background(), process.Worker{ID: "gone", PID: sleeper.Process.Pid}), process.ErrExited)
}

func TestInPool(t *testing.T) {
	p := newProvisioner(t, workerOptions(newLabel(t)))
	pl, err := pool.New[process.Worker](p, pool.Options{MaxSize: 2})
	require.NoError(t, err)
	h, err := pl.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, probe.Once(context.Background(), probe.TCP(h.Value().Addr), time.Second))
	h.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, pl.Close(ctx))
	items, err := p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items, "the pool's Close left workers running")
}

// A worker killed while idle is destroyed by its pool as soon as it is
// reaped, with the pool's default options (no CheckOnAcquire, no janitor
// pass): the next Acquire gets a new, live worker.
func TestDeadIdleWorkerIsNeverHandedOut(t *testing.T) {
	p := newProvisioner(t, workerOptions(newLabel(t)))
	pl, err := pool.New[process.Worker](p, pool.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, pl.Close(ctx))
	})
	h, err := pl.Acquire(context.Background())
	require.NoError(t, err)
	dead := h.Value()
	h.Release()
	require.Equal(t, 1, pl.Stats().Idle)

	require.NoError(t, syscall.Kill(dead.PID, syscall.SIGKILL))
	require.Eventually(t, func() bool { return pl.Stats().Destroyed[pool.ReasonDied] == 1 }, 10*time.Second, 5*time.Millisecond,
		"the pool did not destroy the dead idle worker")
	s := pl.Stats()
	assert.Zero(t, s.Idle)
	assert.Zero(t, s.Destroyed[pool.ReasonUnhealthy], "found by its watch, not by a check")

	h, err = pl.Acquire(context.Background())
	require.NoError(t, err)
	defer h.Release()
	assert.NotEqual(t, dead.ID, h.Value().ID, "the dead worker was handed out")
	assert.True(t, alive(h.Value().PID))
	require.NoError(t, probe.Once(context.Background(), probe.TCP(h.Value().Addr), time.Second))
	assert.Equal(t, uint64(2), pl.Stats().Creates)
}

func TestBadOptions(t *testing.T) {
	good := workerOptions("ok")
	for name, mut := range map[string]func(*process.Options){
		"Command":      func(o *process.Options) { o.Command = nil },
		"Label":        func(o *process.Options) { o.Label = "" },
		"Label ":       func(o *process.Options) { o.Label = "a:b" },
		"Env":          func(o *process.Options) { o.Env = []string{"NOEQUALS"} },
		"StopGrace":    func(o *process.Options) { o.StopGrace = -1 },
		"ReadyOptions": func(o *process.Options) { o.ReadyOptions.Timeout = -1 },
		process.EnvLabel: func(o *process.Options) {
			o.Env = []string{process.EnvLabel + "=x"}
		},
	} {
		o := good
		mut(&o)
		_, err := process.New(o)
		require.ErrorIs(t, err, process.ErrInvalid, name)
		assert.Contains(t, err.Error(), strings.TrimSpace(name))
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}
