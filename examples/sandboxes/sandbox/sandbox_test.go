package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/process"
	"github.com/ttlkit/ttlkit/pool/provisionertest"
)

// Roles of this test binary: an agent (what process sandboxes run), or an
// owner that creates sandboxes and is then killed.
const ownerEnv = "SANDBOX_TEST_OWNER" // "<kind> <label> <n> <root or image> <ids file>"

func TestMain(m *testing.M) {
	agent.ServeIfAgent()
	if spec := os.Getenv(ownerEnv); spec != "" {
		owner(spec)
		return
	}
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	leakcheck.VerifyTestMain(m)
}

var ready = probe.Options{Timeout: 30 * time.Second, AttemptTimeout: 2 * time.Second}

func newProcess(label, root string) (*sandbox.Process, error) {
	return sandbox.NewProcess(sandbox.ProcessOptions{
		Agent: []string{os.Args[0], "agent"}, Label: label, Root: root, StopGrace: 2 * time.Second, Ready: ready,
	})
}

// relabel replaces image with itself labelled key=value.
func relabel(t *testing.T, cli *client.Client, image, key, value string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := "FROM " + image + "\nLABEL " + key + "=" + value + "\n"
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}))
	_, err := tw.Write([]byte(df))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	res, err := cli.ImageBuild(context.Background(), &buf, client.ImageBuildOptions{
		Tags: []string{image}, Remove: true, Labels: map[string]string{dockertest.LabelTest: "1"},
	})
	require.NoError(t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NotContains(t, string(out), `"error"`)
}

func newDocker(cli *client.Client, label, image string) (*sandbox.Docker, error) {
	return sandbox.NewDocker(cli, sandbox.DockerOptions{
		Image: image, Label: label, Network: label, Memory: 64 << 20, CPUs: 0.5, Pids: 64,
		WorkSize: "16m", TmpSize: "16m", StopTimeout: 2 * time.Second, Ready: ready,
	})
}

// owner creates sandboxes, writes their ids to a file, and waits to be
// killed.
func owner(spec string) {
	f := strings.Fields(spec)
	n, _ := strconv.Atoi(f[2])
	var p sandbox.Provisioner
	var err error
	if f[0] == "process" {
		p, err = newProcess(f[1], f[3])
	} else {
		var cli *client.Client
		if cli, err = client.New(client.WithHost(os.Getenv(dockertest.EnvDocker))); err == nil {
			p, err = newDocker(cli, f[1], f[3])
		}
	}
	var ids []string
	for i := 0; i < n && err == nil; i++ {
		var s sandbox.Sandbox
		s, err = p.Create(context.Background())
		ids = append(ids, s.ID)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "owner:", err)
		os.Exit(1)
	}
	// Renamed into place: the test never reads half of it.
	if os.WriteFile(f[4]+".tmp", []byte(strings.Join(ids, " ")), 0o600) != nil || os.Rename(f[4]+".tmp", f[4]) != nil {
		os.Exit(1)
	}
	select {}
}

// crashOwner runs owner in a process of its own and kills it with SIGKILL
// once its sandboxes exist.
func crashOwner(t *testing.T, spec string) []string {
	file := filepath.Join(t.TempDir(), "ids")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerEnv+"="+spec+" "+file)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.After(time.Minute)
	var ids []byte
	for {
		var err error
		if ids, err = os.ReadFile(file); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatal("the owner exited before it was killed")
		case <-deadline:
			t.Fatal("the owner made no sandboxes in a minute")
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.NoError(t, cmd.Process.Kill())
	<-exited
	return strings.Fields(string(ids))
}

// Process sandboxes pass the provisioner contract.
func TestProcessContract(t *testing.T) {
	label := "sbx-contract-" + strconv.Itoa(os.Getpid())
	root := t.TempDir()
	provisionertest.Run(t, provisionertest.Harness[sandbox.Sandbox]{
		New: func(t *testing.T) provisionertest.Provisioner[sandbox.Sandbox] {
			p, err := newProcess(label, root)
			require.NoError(t, err)
			t.Cleanup(func() {
				ls, _ := p.List(context.Background())
				for _, l := range ls {
					_ = p.Destroy(context.Background(), l.Value)
				}
			})
			return p
		},
		Kill: func(t *testing.T, s sandbox.Sandbox) { require.NoError(t, syscall.Kill(s.PID, syscall.SIGKILL)) },
		CrashOwner: func(t *testing.T, n int) []string {
			return crashOwner(t, fmt.Sprintf("process %s %d %s", label, n, root))
		},
	})
	// Destroy removed every work directory.
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, ents)
}

// A work directory whose agent died without a destroy is swept.
func TestSweepDirs(t *testing.T) {
	root := t.TempDir()
	p, err := newProcess("sbx-sweep-"+strconv.Itoa(os.Getpid()), root)
	require.NoError(t, err)
	s, err := p.Create(context.Background())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dead"), 0o700))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(root, "dead"), old, old))
	n, err := p.SweepDirs(context.Background(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.DirExists(t, filepath.Join(root, s.ID), "a live sandbox's directory stays")
	require.NoError(t, p.Destroy(context.Background(), s))
}

// Docker sandboxes pass the provisioner contract, with the image built
// offline and the internal network. The image is built once, and again
// when the engine's is an older agent's.
func TestDockerContract(t *testing.T) {
	cli := dockertest.Client(t)
	label := "sbx-contract-" + strconv.Itoa(os.Getpid())
	image := "ttlkit-test/workspace-base:" + label
	ctx := context.Background()
	ensure := func() bool {
		built, err := sandbox.EnsureImage(ctx, cli, image, sandbox.DefaultBusybox, map[string]string{dockertest.LabelTest: "1"}, nil)
		require.NoError(t, err)
		return built
	}
	assert.True(t, ensure(), "built")
	assert.False(t, ensure(), "the engine has it")
	relabel(t, cli, image, "io.ttlkit.sandboxes.agent-revision", "1")
	assert.True(t, ensure(), "an older agent's image is rebuilt")
	assert.False(t, ensure())
	require.NoError(t, sandbox.EnsureNetwork(ctx, cli, label, label))
	require.NoError(t, sandbox.EnsureNetwork(ctx, cli, label, label), "twice is fine")
	t.Cleanup(func() { require.NoError(t, sandbox.RemoveDocker(ctx, cli, label, image)) })
	provisionertest.Run(t, provisionertest.Harness[sandbox.Sandbox]{
		New: func(t *testing.T) provisionertest.Provisioner[sandbox.Sandbox] {
			p, err := newDocker(cli, label, image)
			require.NoError(t, err)
			return p
		},
		Kill: func(t *testing.T, s sandbox.Sandbox) {
			_, err := cli.ContainerKill(ctx, s.ID, client.ContainerKillOptions{Signal: "KILL"})
			require.NoError(t, err)
		},
		CrashOwner: func(t *testing.T, n int) []string {
			return crashOwner(t, fmt.Sprintf("docker %s %d %s", label, n, image))
		},
	})
}

// A process sandbox's probe accepts only its own agent: the one on its
// port whose work directory is the sandbox's, not another sandbox's agent
// that took the port first.
func TestOwnAgent(t *testing.T) {
	root := t.TempDir()
	srv, err := agent.New(agent.Options{Dir: filepath.Join(root, "theirs")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	addr := strings.TrimPrefix(hs.URL, "http://")
	ctx := context.Background()

	assert.NoError(t, sandbox.OwnAgent(process.Worker{ID: "theirs", Addr: addr})(ctx))
	err = sandbox.OwnAgent(process.Worker{ID: "mine", Addr: addr})(ctx)
	assert.ErrorContains(t, err, `the agent there serves "theirs", not sandbox mine`)
}
