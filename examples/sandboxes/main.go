// Command sandboxes is the backend of an AI assistant's code sandboxes:
// each conversation gets its own sandbox (a container, or a process) from a
// warm pool shared by every backend instance through Redis, runs commands
// and keeps files in it, and loses it — files archived, restored into the
// next one — after an hour without requests or eight hours after it was
// created.
//
//	go run ./examples/sandboxes                  # one backend, process sandboxes, state in memory
//	go run ./examples/sandboxes -redis URL       # one of several instances sharing Redis
//	go run ./examples/sandboxes -docker HOST     # Docker sandboxes (workspace-base image)
//	go run ./examples/sandboxes agent -dir DIR   # the exec agent alone (what runs in a sandbox)
//	go run ./examples/sandboxes image            # build the workspace-base image
//	go run ./examples/sandboxes down [flags]     # destroy every sandbox (files archived), clear Redis
//
// See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxes:", err)
		os.Exit(1)
	}
}

// run starts the backend, or the component args[0] names ("agent",
// "image", "down"), and returns when ctx ends and it has shut down.
func run(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "agent":
			return runAgent(ctx, args[1:], stdout, stderr)
		case "image":
			return runImage(ctx, args[1:], stdout, stderr)
		case "down":
			return runDown(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	return runBackend(ctx, args, getenv, stdout, stderr)
}
