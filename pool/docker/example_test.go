package docker_test

import (
	"context"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/docker"
	"github.com/ttlkit/ttlkit/pool/probe"
)

// A warm pool of sandbox containers: no network, no capabilities, limited
// memory, CPU and processes, a read-only root with a writable work dir.
// It needs a Docker engine, so it is compiled but not run by go test; the
// package's tests run the same on a real engine.
func Example() {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		panic(err)
	}
	prov, err := docker.New(cli, docker.Options{
		Image:          "workspace-base",
		Cmd:            []string{"/agent"},
		Label:          "sandboxes",
		NetworkMode:    "none",
		Memory:         512 << 20,
		NanoCPUs:       1_000_000_000,
		PidsLimit:      128,
		ReadOnlyRootfs: true,
		Tmpfs:          map[string]string{"/work": "size=256m"},
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		StopTimeout:    30 * time.Second,
		ReadyOptions:   probe.Options{Timeout: time.Minute},
	})
	if err != nil {
		panic(err)
	}
	sandboxes, err := pool.New[docker.Container](prov, pool.Options{MinIdle: 2, MaxSize: 10, CleanupOnStart: true})
	if err != nil {
		panic(err)
	}
	defer sandboxes.Close(context.Background())

	h, err := sandboxes.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	defer h.Release()
	_ = h.Value().ID // run code in it
}
