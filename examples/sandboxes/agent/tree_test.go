package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
)

// marks returns n sleep durations, in seconds, that no other process
// uses: a test finds its processes in /proc by them.
func marks(n int) []string {
	base := 100000 + rand.IntN(800000)
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(base + i)
	}
	return out
}

// sleeping returns those of marks that a live "sleep <mark>" process has
// (a zombie's command line is empty).
func sleeping(marks []string) []string {
	want := map[string]bool{}
	for _, m := range marks {
		want[m] = true
	}
	var alive []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) >= 2 && filepath.Base(args[0]) == "sleep" && want[args[1]] {
			alive = append(alive, args[1])
		}
	}
	return alive
}

// treeScript leaves a process each way a command can detach from its
// process group or its parent — in a session of its own (setsid), double
// forked ("(cmd &)"), and a setsid'ed shell's own child — and then sleeps
// itself. Each touches a file as it starts; the script touches "ready"
// once they all have, before its own sleep. It takes five marks.
func treeScript(m []string) string {
	return fmt.Sprintf(`setsid sh -c 'touch s1; exec sleep %s' &
(sh -c 'touch s2; exec sleep %s' &)
sh -c "setsid sh -c 'sleep %s & touch s3; exec sleep %s' &"
until [ -e s1 ] && [ -e s2 ] && [ -e s3 ]; do sleep 0.01; done
touch ready
sleep %s`, m[0], m[1], m[2], m[3], m[4])
}

// gone waits a little for the kernel, then asserts that no process of
// marks is left.
func gone(t *testing.T, marks []string, why string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for len(sleeping(marks)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Empty(t, sleeping(marks), "%s: these sleeps are still alive", why)
}

// An exec past its timeout ends with every process it started, however
// they detached: the agent kills the command's whole tree, not its process
// group.
func TestTimeoutKillsTree(t *testing.T) {
	c, dir := start(t, agent.Options{})
	m := marks(5)
	res, err := c.Exec(context.Background(), agent.ExecRequest{Command: []string{"sh", "-c", treeScript(m)}, TimeoutSec: 2})
	require.NoError(t, err)
	assert.Empty(t, sleeping(m), "every process is dead and reaped before the reply")
	require.FileExists(t, filepath.Join(dir, "ready"), "every process started before the timeout: %+v", res)
	assert.True(t, res.TimedOut)
	assert.Equal(t, 137, res.ExitCode)
	assert.Contains(t, res.Error, "the command and every process it started were killed")
	gone(t, m, "after the timeout")
}

// A caller that goes away ends the exec and everything it started.
func TestCallerGoneKillsTree(t *testing.T) {
	c, _ := start(t, agent.Options{})
	m := marks(5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", treeScript(m)}, TimeoutSec: 60})
		errc <- err
	}()
	require.Eventually(t, func() bool { return len(sleeping(m)) == len(m) }, 20*time.Second, 10*time.Millisecond, "the tree runs")
	cancel()
	require.Error(t, <-errc)
	// The agent notices the caller's end on its own time: a bounded wait.
	require.Eventually(t, func() bool { return len(sleeping(m)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the caller went away: %v are still alive", sleeping(m))
}

// A command that exits normally may leave a server running in the
// background: the reply does not wait for it, and it runs on, but no
// longer than the exec's timeout.
func TestBackgroundEndsAtTimeout(t *testing.T) {
	c, _ := start(t, agent.Options{})
	m := marks(2)
	begin := time.Now()
	res, err := c.Exec(context.Background(), agent.ExecRequest{Command: []string{"sh", "-c", fmt.Sprintf(
		`setsid sh -c 'exec sleep %s' </dev/null >/dev/null 2>&1 &
(sleep %s </dev/null >/dev/null 2>&1 &)
echo started`, m[0], m[1])}, TimeoutSec: 3})
	require.NoError(t, err)
	assert.Equal(t, "started\n", res.Stdout)
	assert.False(t, res.TimedOut)
	assert.Equal(t, 0, res.ExitCode)
	assert.Empty(t, res.Error)
	assert.Less(t, time.Since(begin), 2*time.Second, "the reply does not wait for the background")
	require.Eventually(t, func() bool { return len(sleeping(m)) == 2 }, 2*time.Second, 10*time.Millisecond,
		"the background processes outlive the reply")
	require.Eventually(t, func() bool { return len(sleeping(m)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the background processes end at the exec's timeout: %v are alive", sleeping(m))
	assert.GreaterOrEqual(t, time.Since(begin), 3*time.Second, "and not before")

}

// Close ends every exec — running or only its background left — with
// every process it started, and returns once they are gone.
func TestCloseKillsTrees(t *testing.T) {
	dir := t.TempDir()
	srv, err := agent.New(agent.Options{Dir: dir})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	tr := agent.Transport()
	defer tr.CloseIdleConnections()
	c := agent.NewClient(strings.TrimPrefix(hs.URL, "http://"), &http.Client{Transport: tr}, "")
	m := marks(6)

	// One exec leaves a process in the background, one keeps running.
	res, err := c.Exec(context.Background(), agent.ExecRequest{Command: []string{"sh", "-c",
		"setsid sleep " + m[5] + " </dev/null >/dev/null 2>&1 &"}, TimeoutSec: 60})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	resc := make(chan agent.ExecResult, 1)
	go func() {
		res, err := c.Exec(context.Background(), agent.ExecRequest{Command: []string{"sh", "-c", treeScript(m)}, TimeoutSec: 60})
		assert.NoError(t, err)
		resc <- res
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "ready")); return err == nil },
		20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return len(sleeping(m)) == 6 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, srv.Close())
	assert.Empty(t, sleeping(m), "Close returns once every process is gone")
	res = <-resc
	assert.Equal(t, 137, res.ExitCode)
	assert.Contains(t, res.Error, "the agent is shutting down")
	assert.NoError(t, srv.Close(), "a second Close is harmless")
	_, err = c.Exec(context.Background(), agent.ExecRequest{Command: []string{"true"}})
	var aerr *agent.Error
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusServiceUnavailable, aerr.Status)
}

// The shim passes the command's output, exit status, signal and a start
// failure through unchanged, and runs a program named by a path relative
// to the work directory.
func TestShimPassesThrough(t *testing.T) {
	c, dir := start(t, agent.Options{})
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 300<<10)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), big, 0o644))
	res, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", "cat big; echo err >&2; exit 7"}})
	require.NoError(t, err)
	assert.Equal(t, string(big), res.Stdout, "more than a pipe's buffer")
	assert.Equal(t, "err\n", res.Stderr)
	assert.Equal(t, 7, res.ExitCode)

	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", "kill -TERM $$"}})
	require.NoError(t, err)
	assert.Equal(t, 128+15, res.ExitCode)
	assert.Equal(t, "killed by SIGTERM", res.Error)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.sh"), []byte("#!/bin/sh\necho \"hi $1\"; pwd\n"), 0o755))
	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"./hello.sh", "there"}})
	require.NoError(t, err)
	assert.Equal(t, "hi there\n"+dir+"\n", res.Stdout)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "notexec"), []byte("x"), 0o644))
	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"./notexec"}})
	require.NoError(t, err)
	assert.Equal(t, 127, res.ExitCode)
	assert.Contains(t, res.Error, "could not start: fork/exec ./notexec: permission denied")

	// A command whose configuration (JSON, control characters escaped at
	// six times their size) is more than a pipe holds.
	arg := strings.Repeat("\x01", 40<<10)
	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", `printf %s "$1" | wc -c`, "sh", arg}})
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(len(arg)), strings.TrimSpace(res.Stdout), "%+v", res.Error)

	// The command gets neither the agent's environment nor its files.
	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"env"}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"PATH=" + agent.DefaultPath, "HOME=" + dir}, strings.Fields(res.Stdout))
	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"ls", "/proc/self/fd"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"0", "1", "2", "3"}, strings.Fields(res.Stdout), "stdin, stdout, stderr, and ls's own look at the directory")
}

// A command that stops its shim (SIGSTOP) does not keep it from killing
// every process of the exec at the timeout.
func TestStoppedShim(t *testing.T) {
	c, _ := start(t, agent.Options{})
	m := marks(2)
	res, err := c.Exec(context.Background(), agent.ExecRequest{Command: []string{"sh", "-c",
		fmt.Sprintf("setsid sleep %s & kill -STOP $PPID; exec sleep %s", m[0], m[1])}, TimeoutSec: 1})
	require.NoError(t, err)
	assert.True(t, res.TimedOut, "%+v", res)
	assert.Equal(t, 137, res.ExitCode)
	gone(t, m, "after the timeout")
}

// shims returns the pids of this process's children that are exec shims.
func shims(t *testing.T) []int {
	t.Helper()
	var out []int
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + field + "/cmdline")
			if strings.TrimRight(string(cmd), "\x00") == "sandbox-exec-shim" {
				pid, _ := strconv.Atoi(field)
				out = append(out, pid)
			}
		}
	}
	return out
}

// Shims serve one exec after another (a shim's start costs far more than
// a command's): execs one at a time run under one shim. One killed while idle is replaced without an exec noticing, and
// Close leaves no shim behind.
func TestShimReuse(t *testing.T) {
	srv, err := agent.New(agent.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	ctx := context.Background()
	ppid := func() string {
		res, err := srv.Run(ctx, []string{"sh", "-c", "echo $PPID"}, time.Minute)
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, "%+v", res)
		return strings.TrimSpace(res.Stdout)
	}
	seen := map[string]bool{}
	for range 8 {
		seen[ppid()] = true
	}
	assert.Len(t, seen, 1, "eight execs, one after another, ran under one shim")

	// Idle shims killed, and reaped by the agent (an exec handed to one
	// dying at that very moment fails: it may have started).
	killed := shims(t)
	require.NotEmpty(t, killed)
	for _, pid := range killed {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	require.Eventually(t, func() bool {
		for _, pid := range killed {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)
	assert.False(t, seen[ppid()], "a new shim runs the next exec")

	require.NoError(t, srv.Close())
	assert.Empty(t, shims(t), "Close retires every shim")
}
