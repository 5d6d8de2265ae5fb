package docker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/docker"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/provisionertest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

const workerPkg = "github.com/ttlkit/ttlkit/internal/testworker"

var labels atomic.Int64

func newLabel() string {
	return fmt.Sprintf("ttlkit-test-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), labels.Add(1))
}

func options(image, label string) docker.Options {
	return docker.Options{
		Image:        image,
		Label:        label,
		Labels:       map[string]string{dockertest.LabelTest: "1"},
		Port:         8080,
		StopTimeout:  2 * time.Second,
		ReadyOptions: probe.Options{Timeout: 30 * time.Second},
		Ready: func(c docker.Container) probe.Func {
			return probe.HTTP("http://" + c.Addr + "/healthz")
		},
	}
}

// newProvisioner returns a provisioner and removes every container of its
// label when t ends.
func newProvisioner(t *testing.T, cli *client.Client, opts docker.Options) *docker.Provisioner {
	p, err := docker.New(cli, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		items, err := p.List(ctx)
		require.NoError(t, err)
		for _, it := range items {
			_, _ = cli.ContainerRemove(ctx, it.ID, client.ContainerRemoveOptions{Force: true})
		}
	})
	return p
}

func TestContract(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.Image(t, cli, workerPkg, nil)
	label := newLabel()
	provisionertest.Run(t, provisionertest.Harness[docker.Container]{
		New: func(t *testing.T) provisionertest.Provisioner[docker.Container] {
			return newProvisioner(t, cli, options(image, label))
		},
		Kill: func(t *testing.T, c docker.Container) {
			_, err := cli.ContainerKill(context.Background(), c.ID, client.ContainerKillOptions{Signal: "KILL"})
			require.NoError(t, err)
		},
		CrashOwner: func(t *testing.T, n int) []string {
			// The engine keeps containers whatever happens to the process
			// that created them: an owner that made n and vanished is a
			// provisioner that is dropped without destroying them.
			owner, err := docker.New(cli, options(image, label))
			require.NoError(t, err)
			ids := make([]string, n)
			for i := range ids {
				c, err := owner.Create(context.Background())
				require.NoError(t, err)
				ids[i] = c.ID
			}
			return ids
		},
	})
}

func TestServesThroughItsPublishedPort(t *testing.T) {
	cli := dockertest.Client(t)
	p := newProvisioner(t, cli, options(dockertest.Image(t, cli, workerPkg, nil), newLabel()))
	c, err := p.Create(context.Background())
	require.NoError(t, err)
	resp, err := http.Get("http://" + c.Addr + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, c.ID[:12], strings.TrimSpace(string(body)), "the container's hostname is its short id")
	assert.NotEmpty(t, c.Name)
	assert.WithinDuration(t, time.Now(), c.Created, time.Minute)
	assert.Equal(t, "running", c.State)
	require.NoError(t, p.Destroy(context.Background(), c))
	_, err = cli.ContainerInspect(context.Background(), c.ID, client.ContainerInspectOptions{})
	assert.Error(t, err, "the container still exists after Destroy")
}

func TestExitBeforeReadyIsRemoved(t *testing.T) {
	cli := dockertest.Client(t)
	opts := options(dockertest.Image(t, cli, workerPkg, nil), newLabel())
	opts.Env = []string{"EXIT_CODE=3"}
	opts.ReadyOptions.Timeout = 2 * time.Minute
	p := newProvisioner(t, cli, opts)
	start := time.Now()
	_, err := p.Create(context.Background())
	require.ErrorIs(t, err, docker.ErrExited)
	assert.Contains(t, err.Error(), "exit code 3")
	assert.Less(t, time.Since(start), time.Minute, "Create waited for the readiness timeout although the container had exited")
	items, err := p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items, "a container that failed to start was left behind")
}

// A container that dies stays listed, in state "exited", until it is
// destroyed: List tells the living from the dead.
func TestExitedContainerIsListedAsExited(t *testing.T) {
	cli := dockertest.Client(t)
	p := newProvisioner(t, cli, options(dockertest.Image(t, cli, workerPkg, nil), newLabel()))
	ctx := context.Background()
	c, err := p.Create(ctx)
	require.NoError(t, err)
	items, err := p.List(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.Equal(t, "running", items[0].Value.State)

	_, err = cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		items, err := p.List(ctx)
		return err == nil && len(items) == 1 && items[0].Value.State == "exited"
	}, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, p.Destroy(ctx, c))
	items, err = p.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, items)
}

func TestCancelledCreateLeavesNothing(t *testing.T) {
	cli := dockertest.Client(t)
	opts := options(dockertest.Image(t, cli, workerPkg, nil), newLabel())
	opts.Ready = func(docker.Container) probe.Func {
		return func(context.Context) error { return errors.New("never ready") }
	}
	p := newProvisioner(t, cli, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.Create(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	items, err := p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items, "a cancelled Create left its container")
}

// A Create whose context ends while the engine is making the container
// (the answer never arrives) leaves nothing either: the container has a
// name of the provisioner's, by which it is removed.
func TestCreateCancelledInFlightLeavesNothing(t *testing.T) {
	cli := dockertest.Client(t)
	p := newProvisioner(t, cli, options(dockertest.Image(t, cli, workerPkg, nil), newLabel()))
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*time.Millisecond)
		if c, err := p.Create(ctx); err == nil {
			require.NoError(t, p.Destroy(context.Background(), c))
		}
		cancel()
	}
	items, err := p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items, "a Create cancelled in flight left its container")
}

func TestLimitsAndSecurityApplied(t *testing.T) {
	cli := dockertest.Client(t)
	opts := options(dockertest.Image(t, cli, workerPkg, nil), newLabel())
	opts.Port = 0
	opts.NetworkMode = "none"
	opts.Ready = nil
	opts.Memory = 64 << 20
	opts.NanoCPUs = 500_000_000
	opts.PidsLimit = 32
	opts.ReadOnlyRootfs = true
	opts.Tmpfs = map[string]string{"/work": "size=16m"}
	opts.CapDrop = []string{"ALL"}
	opts.SecurityOpt = []string{"no-new-privileges"}
	opts.User = "65534:65534"
	p := newProvisioner(t, cli, opts)
	c, err := p.Create(context.Background())
	require.NoError(t, err)
	assert.Empty(t, c.Addr)
	info, err := cli.ContainerInspect(context.Background(), c.ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	hc := info.Container.HostConfig
	assert.EqualValues(t, 64<<20, hc.Memory)
	assert.EqualValues(t, 64<<20, hc.MemorySwap, "swap beyond the memory limit")
	assert.EqualValues(t, 500_000_000, hc.NanoCPUs)
	require.NotNil(t, hc.PidsLimit)
	assert.EqualValues(t, 32, *hc.PidsLimit)
	assert.True(t, hc.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, hc.CapDrop)
	assert.Equal(t, []string{"no-new-privileges"}, hc.SecurityOpt)
	assert.EqualValues(t, "none", hc.NetworkMode)
	assert.Equal(t, "65534:65534", info.Container.Config.User)
	assert.Equal(t, opts.Label, info.Container.Config.Labels[docker.LabelPool])
	require.NoError(t, p.Check(context.Background(), c))
	require.NoError(t, p.Destroy(context.Background(), c))
}

func TestInPool(t *testing.T) {
	cli := dockertest.Client(t)
	p := newProvisioner(t, cli, options(dockertest.Image(t, cli, workerPkg, nil), newLabel()))
	pl, err := pool.New[docker.Container](p, pool.Options{MaxSize: 2})
	require.NoError(t, err)
	h, err := pl.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, p.Check(context.Background(), h.Value()))
	h.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, pl.Close(ctx))
	items, err := p.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, items, "the pool's Close left containers")
}

// A container killed while idle is destroyed by its pool as soon as the
// engine reports its death, with the pool's default options (no
// CheckOnAcquire, no janitor pass): the next Acquire gets a new, running
// container.
func TestDeadIdleContainerIsNeverHandedOut(t *testing.T) {
	cli := dockertest.Client(t)
	p := newProvisioner(t, cli, options(dockertest.Image(t, cli, workerPkg, nil), newLabel()))
	pl, err := pool.New[docker.Container](p, pool.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, pl.Close(ctx))
	})
	h, err := pl.Acquire(context.Background())
	require.NoError(t, err)
	dead := h.Value()
	h.Release()
	require.Equal(t, 1, pl.Stats().Idle)

	_, err = cli.ContainerKill(context.Background(), dead.ID, client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return pl.Stats().Destroyed[pool.ReasonDied] == 1 }, 30*time.Second, 10*time.Millisecond,
		"the pool did not destroy the dead idle container")
	s := pl.Stats()
	assert.Zero(t, s.Idle)
	assert.Zero(t, s.Destroyed[pool.ReasonUnhealthy], "found by its watch, not by a check")

	h, err = pl.Acquire(context.Background())
	require.NoError(t, err)
	defer h.Release()
	assert.NotEqual(t, dead.ID, h.Value().ID, "the dead container was handed out")
	require.NoError(t, p.Check(context.Background(), h.Value()))
}

func TestBadOptions(t *testing.T) {
	cli, err := client.New(client.WithHost("unix:///nonexistent.sock"))
	require.NoError(t, err)
	defer cli.Close()
	good := docker.Options{Image: "x", Label: "l"}
	for name, mut := range map[string]func(*docker.Options){
		"Image":        func(o *docker.Options) { o.Image = "" },
		"Label":        func(o *docker.Options) { o.Label = "" },
		"Port":         func(o *docker.Options) { o.Port = 70000 },
		"NetworkMode":  func(o *docker.Options) { o.Port = 80; o.NetworkMode = "none" },
		"Memory":       func(o *docker.Options) { o.Memory = -1 },
		"StopTimeout":  func(o *docker.Options) { o.StopTimeout = -1 },
		"ReadyOptions": func(o *docker.Options) { o.ReadyOptions.Interval = -1 },
		"Labels":       func(o *docker.Options) { o.Labels = map[string]string{docker.LabelPool: "x"} },
	} {
		o := good
		mut(&o)
		_, err := docker.New(cli, o)
		require.ErrorIs(t, err, docker.ErrInvalid, name)
		assert.Contains(t, err.Error(), name)
	}
	_, err = docker.New(nil, good)
	require.ErrorIs(t, err, docker.ErrInvalid)
}
