package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
	"github.com/ttlkit/ttlkit/pool/docker"
)

// containers returns the ids of the test system's containers, in any state.
func containers(t *testing.T, cli *client.Client, label string) []string {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", docker.LabelPool+"="+label),
	})
	require.NoError(t, err)
	ids := make([]string, len(res.Items))
	for i, c := range res.Items {
		ids[i] = c.ID
	}
	return ids
}

// Docker sandboxes, two instances on Redis: the program builds the
// workspace-base image (FROM scratch: busybox-static and the agent) and the
// internal network, each conversation gets a container with the design's
// limits and security settings that reaches neither the outside nor the
// other sandboxes, an exec past its timeout is killed, an idle container
// is destroyed with its files archived and restored into the next one, and
// when the last instance leaves nothing is left behind but what the shared
// state still assigns.
func TestDocker(t *testing.T) {
	cli := dockertest.Client(t)
	shared, _, _ := redisArgs(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("the image needs Debian's busybox-static at /bin/busybox: %v", err)
	}
	e := newEnv(t)
	image := "ttlkit-test/workspace-base:" + e.label
	ctx := context.Background()
	t.Cleanup(func() { require.NoError(t, sandbox.RemoveDocker(ctx, cli, e.label, image)) })
	args := e.args(append(shared, "-docker", os.Getenv(dockertest.EnvDocker), "-image", image,
		"-inactivity-ttl", "5s", "-exec-timeout", "4s", "-gc-interval", "250ms", "-grace", "2s",
		"-orphan-grace", "20s", "-health-interval", "1s")...)
	a := startIn(t, append(args, "-instance", "a")...)
	b := startIn(t, append(args, "-instance", "b")...)

	// The container: the design's limits and security settings.
	res := a.sh(t, "d1", "id -u; echo kept > notes; cat notes; touch /x 2>&1; wc -c < notes").exec(t)
	assert.Equal(t, "65534\nkept\ntouch: /x: Read-only file system\n5\n", res.Stdout)
	_, st := b.state(t, "d1")
	id, _ := st["container_id"].(string)
	require.NotEmpty(t, id)
	info, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	hc := info.Container.HostConfig
	assert.Equal(t, int64(512<<20), hc.Memory)
	assert.Equal(t, int64(1e9), hc.NanoCPUs)
	require.NotNil(t, hc.PidsLimit)
	assert.Equal(t, int64(256), *hc.PidsLimit)
	assert.True(t, hc.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, []string(hc.CapDrop))
	assert.Equal(t, []string{"no-new-privileges"}, hc.SecurityOpt)
	assert.Equal(t, e.label, string(hc.NetworkMode))
	assert.Contains(t, hc.Tmpfs["/work"], ",size=256m,", "the work directory fits in the memory limit")
	assert.Contains(t, hc.Tmpfs["/tmp"], ",size=64m,")
	assert.Equal(t, "65534:65534", info.Container.Config.User)
	assert.Equal(t, e.label, info.Container.Config.Labels[docker.LabelPool])

	// No network but the backend's way in: neither the outside nor the
	// other sandboxes' agents answer.
	b.sh(t, "d2", "true").exec(t)
	_, st2 := a.state(t, "d2")
	other := fmt.Sprintf("%v", st2["host"])
	res = a.sh(t, "d1", "nc -w 1 1.1.1.1 80 </dev/null; echo outside=$?; nc -w 1 "+other+" 8080 </dev/null; echo neighbour=$?").exec(t)
	assert.Contains(t, res.Stdout, "outside=1")
	assert.Contains(t, res.Stdout, "neighbour=1")

	// One exec past its timeout is killed; busybox sleep is gone after.
	r := call(t, "POST", b.url("/conversations/d1/exec"), execBody(0.5, "sh", "-c", "sleep 30"))
	res = r.exec(t)
	assert.True(t, res.TimedOut)
	assert.Equal(t, 137, res.ExitCode)
	assert.NotContains(t, a.sh(t, "d1", "ps").exec(t).Stdout, "sleep 30")

	// Nor does any process it started, however it detached; nor what is
	// left when a command kills its exec's shim (the agent, their
	// subreaper, kills it), nor a server the command left running once
	// the exec's timeout has passed.
	m := marks(9)
	res = call(t, "POST", b.url("/conversations/d1/exec"), execBody(2, "sh", "-c", treeScript(m))).exec(t)
	assert.True(t, res.TimedOut, "%+v", res)
	res = a.sh(t, "d1", fmt.Sprintf("setsid sleep %s & (sleep %s &); kill -9 $PPID; exec sleep %s", m[5], m[6], m[7])).exec(t)
	assert.Equal(t, 137, res.ExitCode, "%+v", res)
	assert.Contains(t, res.Error, "the command's shim was killed")
	res = call(t, "POST", b.url("/conversations/d1/exec"), execBody(1, "sh", "-c", "setsid sleep "+m[8]+" >/dev/null 2>&1 &")).exec(t)
	assert.Equal(t, 0, res.ExitCode, "%+v", res)
	assert.Contains(t, a.sh(t, "d1", "ps -o args").exec(t).Stdout, "sleep "+m[8], "the server outlives its exec's reply")
	require.Eventually(t, func() bool { return !strings.Contains(a.sh(t, "d1", "ps -o args").exec(t).Stdout, "sleep "+m[8]) },
		10*time.Second, 100*time.Millisecond, "the server ends at its exec's timeout")
	ps := a.sh(t, "d1", "ls ready; ps -o args").exec(t).Stdout
	assert.Contains(t, ps, "ready\n", "every process of the tree had started")
	for _, mk := range m {
		assert.NotContains(t, ps, "sleep "+mk+"\n")
	}

	// Idle: destroyed after the inactivity TTL, files archived and
	// restored into a new container.
	require.Eventually(t, func() bool { _, st := a.state(t, "d1"); return st["status"] == "archived" },
		30*time.Second, 100*time.Millisecond)
	assert.FileExists(t, filepath.Join(e.archive, "d1.tar"))
	assert.NotContains(t, containers(t, cli, e.label), id)
	res = b.sh(t, "d1", "cat notes").exec(t)
	assert.Equal(t, "kept\n", res.Stdout)
	_, st = a.state(t, "d1")
	assert.NotEqual(t, id, st["container_id"])

	// Both instances leave: the shared state keeps the assigned containers
	// and the warm ones for the next instance; a DELETE removes one for
	// good.
	require.Equal(t, http.StatusNoContent, call(t, "DELETE", a.url("/conversations/d2"), nil).status)
	require.NoError(t, a.stop())
	require.NoError(t, b.stop())
	left := containers(t, cli, e.label)
	assert.Contains(t, strings.Join(left, ","), fmt.Sprint(st["container_id"]), "d1's container stays assigned")
	assert.NotContains(t, strings.Join(left, ","), fmt.Sprint(st2["container_id"]), "d2's container was deleted")
}

// usage is what Docker's stats say one container uses.
type usage struct {
	Pids   struct{ Current, Limit uint64 } `json:"pids_stats"`
	Memory struct{ Usage, Limit uint64 }   `json:"memory_stats"`
}

func statsOf(cli *client.Client, id string) (usage, error) {
	var u usage
	res, err := cli.ContainerStats(context.Background(), id, client.ContainerStatsOptions{})
	if err != nil {
		return u, err
	}
	defer res.Body.Close()
	return u, json.NewDecoder(res.Body).Decode(&u)
}

// abuse is what one abusive exec did, and what its neighbour saw meanwhile.
type abuse struct {
	reply              reply         // the abusive exec's
	probes             int           // the neighbour's execs while it ran
	slowest            time.Duration // the slowest of them
	maxPids, maxMemory uint64        // the most the abuser's container used
}

// abuseIn runs script in conv's sandbox (container id) while the
// neighbour conversation, whose notes file says "safe", runs execs that
// must answer correctly and promptly, the backend answers /healthz, the
// host starts processes, and the abuser's container is sampled.
func abuseIn(t *testing.T, in *instance, cli *client.Client, conv, id, neighbour, script string, timeout float64) abuse {
	t.Helper()
	var a abuse
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		a.reply, err = tryCall("POST", in.url("/conversations/"+conv+"/exec"), execBody(timeout, "sh", "-c", script))
	}()
	sampled := make(chan error, 1)
	go func() {
		for {
			u, err := statsOf(cli, id)
			if err != nil {
				sampled <- err
				return
			}
			a.maxPids, a.maxMemory = max(a.maxPids, u.Pids.Current), max(a.maxMemory, u.Memory.Usage)
			select {
			case <-done:
				sampled <- nil
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	for {
		start := time.Now()
		res := in.sh(t, neighbour, "cat notes; echo probe > probe; cat probe").exec(t)
		took := time.Since(start)
		assert.Equal(t, "safe\nprobe\n", res.Stdout, "the neighbour's exec")
		assert.Less(t, took, 5*time.Second, "the neighbour's exec answers promptly")
		a.probes++
		a.slowest = max(a.slowest, took)
		assert.Equal(t, http.StatusOK, call(t, "GET", in.url("/healthz"), nil).status, "the backend answers")
		assert.NoError(t, exec.Command("true").Run(), "the host starts processes")
		select {
		case <-done:
			require.NoError(t, err, "the abusive exec")
			require.NoError(t, <-sampled, "docker stats")
			assert.GreaterOrEqual(t, a.probes, 3, "the neighbour ran execs while the abuse ran")
			return a
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A fork bomb, a memory hog and a file-system filler in one conversation's
// Docker sandbox: each is stopped by the sandbox's own limits (pids,
// memory, the work directory's size) and reported in the exec's reply,
// while another conversation's execs keep answering correctly and
// promptly, the backend and the host keep working, and the abuser's
// sandbox — the same container — serves its conversation after. Nothing
// is left when the backend stops.
func TestDockerAbuse(t *testing.T) {
	cli := dockertest.Client(t)
	e := newEnv(t)
	image := "ttlkit-test/workspace-base:" + e.label
	ctx := context.Background()
	t.Cleanup(func() { require.NoError(t, sandbox.RemoveDocker(ctx, cli, e.label, image)) })
	in := startIn(t, e.args("-docker", os.Getenv(dockertest.EnvDocker), "-image", image,
		"-exec-timeout", "30s", "-grace", "2s", "-warm-min", "1", "-warm-max", "2")...)

	in.sh(t, "neighbour", "echo safe > notes").exec(t)
	in.sh(t, "abuser", "true").exec(t)
	var quiet time.Duration
	for range 10 {
		start := time.Now()
		in.sh(t, "neighbour", "cat notes; echo probe > probe; cat probe").exec(t)
		quiet = max(quiet, time.Since(start))
	}
	t.Logf("without abuse, the neighbour's execs took at most %v", quiet)
	_, st := in.state(t, "abuser")
	id := fmt.Sprint(st["container_id"])
	healthy := func(what string) {
		t.Helper()
		res := in.sh(t, "abuser", "echo ok; ps | wc -l").exec(t)
		fields := strings.Fields(res.Stdout)
		require.Len(t, fields, 2, "after the %s: %+v", what, res)
		assert.Equal(t, "ok", fields[0], "after the %s", what)
		n, _ := strconv.Atoi(fields[1])
		assert.Less(t, n, 10, "after the %s, none of its processes is left: %s", what, res.Stdout)
		_, st := in.state(t, "abuser")
		assert.Equal(t, id, st["container_id"], "after the %s, the same sandbox serves", what)
	}

	// A fork bomb (bounded at 1023 processes, so that a build without the
	// limit cannot take the host down): at most 256 processes, forks
	// refused beyond; at the exec's timeout every one is killed.
	bomb := abuseIn(t, in, cli, "abuser", id, "neighbour",
		`b() { if [ $1 -lt 9 ]; then b $(($1+1)) & b $(($1+1)) & fi; sleep 3600; }; b 0 & wait`, 4)
	res := bomb.reply.exec(t)
	assert.True(t, res.TimedOut, "%+v", res)
	assert.Contains(t, res.Stderr, "can't fork: Resource temporarily unavailable")
	assert.LessOrEqual(t, bomb.maxPids, uint64(256), "the pids limit holds")
	assert.Greater(t, bomb.maxPids, uint64(100), "the bomb ran")
	healthy("fork bomb")
	t.Logf("fork bomb: up to %d processes; the neighbour's %d execs took at most %v", bomb.maxPids, bomb.probes, bomb.slowest)

	// Memory hogs (700 MB each, over the 512 MiB limit) for three seconds,
	// then one more as the command itself: the kernel kills each inside
	// the container, and not the agent.
	hog := abuseIn(t, in, cli, "abuser", id, "neighbour", `n=0; end=$(($(date +%s) + 3))
		while [ $(date +%s) -lt $end ]; do tail -c 700000000 /dev/zero; [ $? = 137 ] && n=$((n + 1)); done
		echo "killed $n times"; exec tail -c 700000000 /dev/zero`, 20)
	res = hog.reply.exec(t)
	assert.Regexp(t, `^killed [1-9][0-9]* times\n$`, res.Stdout)
	assert.Equal(t, 137, res.ExitCode)
	assert.False(t, res.TimedOut)
	assert.Equal(t, "killed by the kernel's out-of-memory killer: the sandbox reached its memory limit", res.Error)
	assert.LessOrEqual(t, hog.maxMemory, uint64(512<<20), "the memory limit holds")
	healthy("memory hog")
	t.Logf("memory hog: up to %d MiB; the neighbour's %d execs took at most %v", hog.maxMemory>>20, hog.probes, hog.slowest)

	// A file-system filler: the work directory is full at its size, and
	// says so; the sandbox is fine once the file is gone.
	fill := abuseIn(t, in, cli, "abuser", id, "neighbour",
		`dd if=/dev/zero of=/work/fill bs=1M; echo "dd: $?"; df -m /work | tail -n 1; sleep 3`, 20)
	res = fill.reply.exec(t)
	assert.Contains(t, res.Stderr, "No space left on device")
	assert.Regexp(t, `dd: 1\ntmpfs +256 +256 +0 100% /work\n`, res.Stdout)
	assert.LessOrEqual(t, fill.maxMemory, uint64(512<<20))
	healthy("file-system filler")
	assert.Regexp(t, `tmpfs +256 +0 +256 +0% /work`, in.sh(t, "abuser", "rm fill; df -m /work").exec(t).Stdout)
	t.Logf("file-system filler: up to %d MiB; the neighbour's %d execs took at most %v", fill.maxMemory>>20, fill.probes, fill.slowest)

	// Alone with its state in memory, the backend destroys every sandbox
	// when it stops.
	require.NoError(t, in.stop())
	assert.Empty(t, containers(t, cli, e.label))
}
