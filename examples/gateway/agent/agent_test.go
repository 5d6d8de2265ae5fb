package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
	"github.com/ttlkit/ttlkit/pool/docker"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

var labels atomic.Int64

func newLabel() string {
	return fmt.Sprintf("agenttest-%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9, labels.Add(1))
}

// newLocal returns a Local agent whose workers are all deleted when t ends.
func newLocal(t *testing.T, opts agent.Options, fns ...string) *agent.Local {
	t.Helper()
	a, err := agent.NewLocal(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, fn := range fns {
			ws, err := a.List(ctx, agent.ListRequest{Function: fn})
			assert.NoError(t, err)
			for _, w := range ws {
				assert.NoError(t, a.Delete(ctx, agent.DeleteRequest{Function: fn, ID: w.ID}))
			}
		}
	})
	return a
}

func pidOf(t *testing.T, w agent.Worker) int {
	t.Helper()
	parts := strings.SplitN(w.ID, "-", 3)
	require.Len(t, parts, 3, w.ID)
	require.Equal(t, "p", parts[0], w.ID)
	pid, err := strconv.Atoi(parts[1])
	require.NoError(t, err)
	return pid
}

// alive reports whether process pid runs: it exists and is not a zombie (a
// worker this process started and killed is one until its reaper collects
// it a moment later).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func ids(ws []agent.Worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

// exercise runs the Agent contract on a: create with env and output, list
// by function, delete (twice), delete of an unknown worker.
func exercise(t *testing.T, a agent.Agent, out *testenv.Buffer) {
	ctx := context.Background()
	dir := t.TempDir()
	start := time.Now()
	w, err := a.Create(ctx, agent.CreateRequest{
		Function: "fn",
		Command:  []string{"sh", "-c", `echo "$GREETING" > ` + filepath.Join(dir, "env") + `; echo "started $GREETING"; exec sleep 300`},
		Env:      []string{"GREETING=hi"},
	})
	require.NoError(t, err)
	assert.Equal(t, "fn", w.Function)
	assert.WithinRange(t, w.Created, start.Add(-time.Second), time.Now().Add(time.Second))
	pid := pidOf(t, w)
	assert.True(t, alive(pid))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "started hi") }, 10*time.Second, 10*time.Millisecond, "the worker's output")
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(env))

	other, err := a.Create(ctx, agent.CreateRequest{Function: "other", Command: []string{"sleep", "300"}})
	require.NoError(t, err)

	ws, err := a.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.Equal(t, []string{w.ID}, ids(ws), "only fn's workers")
	assert.Equal(t, "fn", ws[0].Function)
	assert.WithinDuration(t, w.Created, ws[0].Created, time.Second)

	require.NoError(t, a.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: w.ID}))
	assert.False(t, alive(pid), "Delete returns once the process is gone")
	ws, err = a.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.Empty(t, ws)
	assert.NoError(t, a.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: w.ID}), "deleting twice")
	assert.NoError(t, a.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: "p-1-nosuchworker"}), "deleting a worker that never was")

	ws, err = a.List(ctx, agent.ListRequest{Function: "other"})
	require.NoError(t, err)
	assert.Equal(t, []string{other.ID}, ids(ws), "another function's worker is untouched")
	require.NoError(t, a.Delete(ctx, agent.DeleteRequest{Function: "other", ID: other.ID}))
}

func TestLocal(t *testing.T) {
	out := &testenv.Buffer{}
	a := newLocal(t, agent.Options{Label: newLabel(), Output: out, StopGrace: time.Second}, "fn", "other")
	exercise(t, a, out)
}

// WorkerOutput receives, beside Output, the stdout and stderr of the worker
// a request's Key names, and only its.
func TestWorkerOutput(t *testing.T) {
	out := &testenv.Buffer{}
	var mu sync.Mutex
	per := map[string]*testenv.Buffer{}
	a := newLocal(t, agent.Options{Label: newLabel(), Output: out, StopGrace: time.Second, WorkerOutput: func(key string) io.Writer {
		mu.Lock()
		defer mu.Unlock()
		per[key] = &testenv.Buffer{}
		return per[key]
	}}, "fn")
	ctx := context.Background()
	for _, key := range []string{"k1", "k2"} {
		_, err := a.Create(ctx, agent.CreateRequest{Function: "fn", Key: key,
			Command: []string{"sh", "-c", "echo out " + key + "; echo err " + key + " >&2; exec sleep 300"}})
		require.NoError(t, err)
	}
	_, err := a.Create(ctx, agent.CreateRequest{Function: "fn", Command: []string{"sh", "-c", "echo keyless; exec sleep 300"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s := out.String()
		return strings.Contains(s, "err k1") && strings.Contains(s, "err k2") && strings.Contains(s, "keyless")
	}, 10*time.Second, 10*time.Millisecond, "all of it in Output")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, per, 2, "no writer for a request without a Key")
	for _, key := range []string{"k1", "k2"} {
		lines := strings.Split(strings.TrimSpace(per[key].String()), "\n")
		assert.ElementsMatch(t, []string{"out " + key, "err " + key}, lines)
	}
}

// A worker outlives the agent that started it: another agent with the same
// label (a restarted gateway) lists and deletes it; another label does not
// see it.
func TestWorkersOutliveTheirAgent(t *testing.T) {
	ctx := context.Background()
	label := newLabel()
	first := newLocal(t, agent.Options{Label: label}, "fn")
	w, err := first.Create(ctx, agent.CreateRequest{Function: "fn", Command: []string{"sleep", "300"}})
	require.NoError(t, err)

	stranger := newLocal(t, agent.Options{Label: label + "-x"}, "fn")
	ws, err := stranger.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.Empty(t, ws, "another label's workers are not listed")

	second := newLocal(t, agent.Options{Label: label}, "fn")
	ws, err = second.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.Equal(t, []string{w.ID}, ids(ws))
	require.NoError(t, second.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: w.ID}))
	assert.False(t, alive(pidOf(t, w)))
	assert.NoError(t, first.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: w.ID}), "its first agent finds it gone")
}

func TestBadRequests(t *testing.T) {
	_, err := agent.NewLocal(agent.Options{})
	assert.ErrorContains(t, err, "Label is empty")

	a := newLocal(t, agent.Options{Label: newLabel()}, "img")
	_, err = a.Create(context.Background(), agent.CreateRequest{Function: "img", Image: "some/image"})
	assert.ErrorContains(t, err, "function img: an image function needs a Docker engine")
	_, err = a.Create(context.Background(), agent.CreateRequest{Function: "fn", Command: []string{filepath.Join(t.TempDir(), "missing")}})
	assert.Error(t, err, "a command that does not exist")
}

// The same contract over gRPC, and errors carried across it.
func TestGRPC(t *testing.T) {
	out := &testenv.Buffer{}
	local := newLocal(t, agent.Options{Label: newLabel(), Output: out, StopGrace: time.Second}, "fn", "other")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := agent.NewServer(local, "")
	served := make(chan error, 1)
	go func() { served <- agent.Serve(srv, ln) }()
	defer func() {
		srv.GracefulStop()
		assert.NoError(t, <-served)
	}()
	cl, err := agent.Dial(ln.Addr().String(), "")
	require.NoError(t, err)
	defer cl.Close()

	exercise(t, cl, out)

	_, err = cl.Create(context.Background(), agent.CreateRequest{Function: "img", Image: "some/image"})
	require.Error(t, err)
	assert.Contains(t, status.Convert(err).Message(), "an image function needs a Docker engine")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = cl.List(ctx, agent.ListRequest{Function: "fn"})
	assert.Equal(t, codes.Canceled, status.Code(err))
}

// A client whose agent went away fails its calls within a moment, and is
// served by the agent started again at the same address at once: not
// only once gRPC's growing wait between attempts to reconnect has passed.
func TestGRPCAgentBack(t *testing.T) {
	local := newLocal(t, agent.Options{Label: newLabel()}, "fn")
	sock := filepath.Join(t.TempDir(), "agent.sock")
	serve := func() func() {
		ln, err := net.Listen("unix", sock)
		require.NoError(t, err)
		srv := agent.NewServer(local, "")
		served := make(chan error, 1)
		go func() { served <- agent.Serve(srv, ln) }()
		return func() {
			srv.Stop()
			if err := <-served; !errors.Is(err, grpc.ErrServerStopped) { // stopped before it served
				assert.NoError(t, err)
			}
		}
	}
	stop := serve()
	cl, err := agent.Dial("unix:"+sock, "")
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.List(context.Background(), agent.ListRequest{Function: "fn"})
	require.NoError(t, err)

	stop()
	for range 3 {
		start := time.Now()
		_, err = cl.List(context.Background(), agent.ListRequest{Function: "fn"})
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		assert.Less(t, time.Since(start), 10*time.Second, "a call fails within a moment while the agent is down")
	}

	stop = serve()
	defer stop()
	_, err = cl.List(context.Background(), agent.ListRequest{Function: "fn"})
	assert.NoError(t, err, "the agent started again serves the next call")
}

// Containers on a real engine: labels, the memory limit, the security
// options and the host's network; listed beside processes; deleted.
func TestLocalDocker(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.Image(t, cli, "github.com/ttlkit/ttlkit/internal/testworker", nil)
	ctx := context.Background()
	label := newLabel()
	a := newLocal(t, agent.Options{Label: label, Docker: cli, Labels: map[string]string{dockertest.LabelTest: "1"}, StopGrace: time.Second}, "fn")

	c, err := a.Create(ctx, agent.CreateRequest{Function: "fn", Image: image, Env: []string{"ADDR=127.0.0.1:0", "K=v"}, MemoryMB: 256})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(c.ID, "c-"), c.ID)
	id := strings.TrimPrefix(c.ID, "c-")
	p, err := a.Create(ctx, agent.CreateRequest{Function: "fn", Command: []string{"sleep", "300"}})
	require.NoError(t, err)

	info, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	ct := info.Container
	assert.Equal(t, label+".fn", ct.Config.Labels[docker.LabelPool])
	assert.Equal(t, "1", ct.Config.Labels[dockertest.LabelTest])
	assert.Contains(t, ct.Config.Env, "K=v")
	assert.Equal(t, int64(256)<<20, ct.HostConfig.Memory, "MemorySize is the memory limit")
	assert.Equal(t, "host", string(ct.HostConfig.NetworkMode))
	assert.Contains(t, ct.HostConfig.CapDrop, "ALL")
	assert.Contains(t, ct.HostConfig.SecurityOpt, "no-new-privileges")

	ws, err := a.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{c.ID, p.ID}, ids(ws), "containers and processes")

	for _, w := range ws {
		assert.False(t, w.Exited)
	}
	// A container that dies stays listed, as exited, until it is deleted.
	_, err = cli.ContainerKill(ctx, id, client.ContainerKillOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ws, err := a.List(ctx, agent.ListRequest{Function: "fn"})
		return err == nil && len(ws) == 2 && slices.ContainsFunc(ws, func(w agent.Worker) bool { return w.ID == c.ID && w.Exited })
	}, 30*time.Second, 20*time.Millisecond)

	require.NoError(t, a.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: c.ID}))
	_, err = cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	assert.True(t, cerrdefs.IsNotFound(err), "removed: %v", err)
	assert.NoError(t, a.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: c.ID}), "deleting twice")
	ws, err = a.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.Equal(t, []string{p.ID}, ids(ws))
}
