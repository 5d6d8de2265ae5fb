package docker_test

import (
	"context"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/docker"
	"github.com/ttlkit/ttlkit/pool/probe"
)

// A warm pool of isolated containers: no network, no capabilities, limited
// memory, CPU and processes, a read-only root with a writable work dir.
// It needs a Docker engine, so it is compiled but not run by go test; the
// package's tests run the same on a real engine.
func Example() {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		panic(err)
	}
	prov, err := docker.New(cli, docker.Options{
		Image:          "worker-base",
		Cmd:            []string{"/agent"},
		Label:          "workers",
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
	workers, err := pool.New[docker.Container](prov, pool.Options{MinIdle: 2, MaxSize: 10, CleanupOnStart: true})
	if err != nil {
		panic(err)
	}
	defer workers.Close(context.Background())

	h, err := workers.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	defer h.Release()
	_ = h.Value().ID // run code in it
}
