package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An exec leaves no process behind on process sandboxes, however its
// processes detached — a session of their own (setsid), a double fork, a
// setsid'ed shell's children: past its timeout they are all killed before
// the reply; so are they when the command kills its exec's shim (the
// agent, their subreaper, kills what comes to it); when the sandbox is
// destroyed while the exec runs; and when its agent is killed.
func TestExecLeavesNothing(t *testing.T) {
	e := newEnv(t)
	in := startIn(t, e.args("-exec-timeout", "30s", "-grace", "1s")...)

	// Past its timeout.
	m := marks(5)
	res := call(t, "POST", in.url("/conversations/tree/exec"), execBody(2, "sh", "-c", treeScript(m))).exec(t)
	assert.Empty(t, sleeping(m), "every process is dead and reaped before the reply")
	assert.True(t, res.TimedOut, "%+v", res)
	assert.Equal(t, 137, res.ExitCode)
	assert.Equal(t, "timed out after 2s: the command and every process it started were killed", res.Error)
	assert.Equal(t, "ready\n", in.sh(t, "tree", "ls ready").exec(t).Stdout, "every process had started")

	// The command kills its shim.
	m = marks(3)
	res = in.sh(t, "tree", fmt.Sprintf(`setsid sh -c 'exec sleep %s' </dev/null >/dev/null 2>&1 &
(sleep %s </dev/null >/dev/null 2>&1 &)
echo killing; kill -9 $PPID; exec sleep %s`, m[0], m[1], m[2])).exec(t)
	gone(t, m, "after the shim was killed")
	assert.Equal(t, "killing\n", res.Stdout)
	assert.Equal(t, 137, res.ExitCode)
	assert.Equal(t, "the command's shim was killed (by the command?): the command and every process it started were killed", res.Error)
	assert.Equal(t, "still here\n", in.sh(t, "tree", "echo still here").exec(t).Stdout, "the sandbox serves on")

	// The sandbox is destroyed while the exec runs.
	m = marks(5)
	done := make(chan reply, 1)
	go func() {
		r, err := tryCall("POST", in.url("/conversations/doomed/exec"), execBody(25, "sh", "-c", treeScript(m)))
		assert.NoError(t, err)
		done <- r
	}()
	require.Eventually(t, func() bool { return len(sleeping(m)) == len(m) }, 20*time.Second, 10*time.Millisecond, "the tree runs")
	require.Equal(t, http.StatusNoContent, call(t, "DELETE", in.url("/conversations/doomed"), nil).status)
	gone(t, m, "after the destroy")
	r := <-done
	t.Logf("the destroyed sandbox's exec: %s", r)
	assert.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Contains(t, r.errorText(t), "the agent is shutting down: the command and every process it started were killed")

	// The agent is killed with SIGKILL while the exec runs (a process
	// sandbox's stop past its grace): its shims see their stop pipe
	// close, and kill their commands' processes on their own.
	m = marks(5)
	go func() {
		r, err := tryCall("POST", in.url("/conversations/killed/exec"), execBody(25, "sh", "-c", treeScript(m)))
		assert.NoError(t, err)
		done <- r
	}()
	require.Eventually(t, func() bool { return len(sleeping(m)) == len(m) }, 20*time.Second, 10*time.Millisecond, "the tree runs")
	pid, err := strconv.Atoi(strings.TrimSpace(in.sh(t, "killed", "echo "+agentPID).exec(t).Stdout))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	r = <-done
	assert.Equal(t, http.StatusBadGateway, r.status, "%s", r)
	gone(t, m, "after the agent was killed")
}
