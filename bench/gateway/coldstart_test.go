package gateway_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
	"github.com/ttlkit/ttlkit/pool/docker"
)

// coldStart times b.N starts of an echo worker until its runtime first
// polls the Runtime API (ready to serve), each stopped outside the timer.
// start starts one with its Runtime API endpoint and returns the function
// that stops it.
func coldStart(b *testing.B, start func(endpoint string) (stop func())) {
	b.ReportAllocs()
	rt, addr := runtimeAPI(b)
	b.ResetTimer()
	for i := range b.N {
		key := "c" + strconv.Itoa(i)
		stop := start(runtimeapi.Endpoint(addr, key, rt.Add(key)))
		if err := rt.WaitReady(ctx, key); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		stop()
		rt.Gone(key)
		b.StartTimer()
	}
}

// BenchmarkGatewayColdStart: a worker from nothing to ready, as a process
// and as a container. impl=ttlkit is the gateway's agent (pool/process,
// pool/docker); the floor is exec.Command (impl=exec) and the engine's
// create and start calls with the same configuration (impl=engine).
func BenchmarkGatewayColdStart(b *testing.B) {
	b.Run("worker=process/impl=ttlkit", func(b *testing.B) {
		ag, bin := newAgent(b, agent.Options{}), echo(b)
		coldStart(b, func(endpoint string) func() {
			w, err := ag.Create(ctx, agent.CreateRequest{Function: "echo", Command: []string{bin}, Env: workerEnv(endpoint)})
			if err != nil {
				b.Fatal(err)
			}
			return func() { _ = ag.Delete(ctx, agent.DeleteRequest{Function: "echo", ID: w.ID}) }
		})
	})
	b.Run("worker=process/impl=exec", func(b *testing.B) {
		bin := echo(b)
		coldStart(b, func(endpoint string) func() {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), workerEnv(endpoint)...)
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			return func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
	})

	// The image is built once, for both container cases, and removed when
	// the benchmark ends; a case without Docker is skipped.
	parent := b
	var image string
	withDocker := func(b *testing.B) *client.Client {
		cli := dockertest.Client(b)
		if image == "" {
			image = dockertest.BinaryImage(parent, dockertest.Client(parent), echo(b), "echo", nil)
		}
		return cli
	}
	b.Run("worker=container/impl=ttlkit", func(b *testing.B) {
		ag := newAgent(b, agent.Options{Docker: withDocker(b)})
		coldStart(b, func(endpoint string) func() {
			w, err := ag.Create(ctx, agent.CreateRequest{Function: "echo", Image: image, Env: workerEnv(endpoint), MemoryMB: 128})
			if err != nil {
				b.Fatal(err)
			}
			return func() { _ = ag.Delete(ctx, agent.DeleteRequest{Function: "echo", ID: w.ID}) }
		})
	})
	b.Run("worker=container/impl=engine", func(b *testing.B) {
		cli := withDocker(b)
		label := newLabel()
		mem := int64(128 << 20)
		coldStart(b, func(endpoint string) func() {
			res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
				Config: &container.Config{Image: image, Env: workerEnv(endpoint), Labels: map[string]string{docker.LabelPool: label}},
				HostConfig: &container.HostConfig{
					NetworkMode: "host", CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
					Resources: container.Resources{Memory: mem, MemorySwap: mem},
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
				b.Fatal(err)
			}
			return func() {
				_, _ = cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true})
			}
		})
	})
}
