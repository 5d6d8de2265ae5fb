//go:build linux

package process_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/process"
)

// A pool of at most two worker processes, each a server on a port of its
// own. Here the test binary plays the worker program; a real program passes
// its worker's binary and flags, with "{addr}" where the listen address
// goes.
func Example() {
	prov, err := process.New(process.Options{
		Command:   []string{os.Args[0], "{addr}"},
		Env:       []string{"PROCESS_TEST_ROLE=worker"},
		Label:     "example-workers",
		StopGrace: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	workers, err := pool.New[process.Worker](prov, pool.Options{MaxSize: 2})
	if err != nil {
		panic(err)
	}
	h, err := workers.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("worker healthy:", prov.Check(context.Background(), h.Value()) == nil)
	h.Release()

	listed, _ := prov.List(context.Background())
	fmt.Println("workers running:", len(listed))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = workers.Close(ctx) // stops every worker
	listed, _ = prov.List(context.Background())
	fmt.Println("after Close:", len(listed))
	// Output:
	// worker healthy: true
	// workers running: 1
	// after Close: 0
}
