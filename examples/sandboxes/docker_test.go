package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/internal/dockertest"
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
// internal network, each conversation gets a container with the seed's
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

	// The container: the seed's limits and security settings.
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
	assert.Contains(t, hc.Tmpfs, "/work")
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
