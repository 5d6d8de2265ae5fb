// Command workspaces is a cloud-IDE workspace system: each workspace is a
// server process with its own files, reached through an activity-recording
// proxy; a TTL runner puts workspaces idle for TTL_STANDBY_SECONDS into
// STANDBY (server stopped, files kept) and archives them
// TTL_ARCHIVE_SECONDS later; a request brings a workspace back.
//
//	go run ./examples/workspaces              # everything in one process, in memory
//	go run ./examples/workspaces proxy        # one component, on Redis + PostgreSQL
//	go run ./examples/workspaces runner
//	go run ./examples/workspaces controller
//	go run ./examples/workspaces -help        # every setting, flag and environment variable
//
// See README.md for a walk-through.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "workspaces:", err)
		os.Exit(1)
	}
}
