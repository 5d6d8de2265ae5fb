// Command sandbox-agent is the exec agent of the workspace-base image: the
// agent package's Main in a small static binary, which the image builder
// compiles (the example's own binary, with the Docker and Redis clients,
// would be four times the size for the same code).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Main(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
		os.Exit(1)
	}
}
