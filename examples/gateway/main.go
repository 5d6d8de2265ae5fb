// Command gateway is a serverless gateway: it runs the functions of an AWS
// SAM template as real Lambda runtimes in pooled worker processes or
// Docker containers, and serves the Lambda Invoke API.
//
//	go run ./examples/gateway          # gateway with an in-process agent
//	go run ./examples/gateway agent    # the agent alone, over gRPC
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
	if err := run(ctx, os.Args[1:], takeSecrets(), os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// run starts the gateway, or the component args[0] names ("agent"), and
// returns when ctx ends and it has shut down.
func run(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "agent" {
		return runAgent(ctx, args[1:], getenv, stdout, stderr)
	}
	return runGateway(ctx, args, getenv, stdout, stderr)
}

// takeSecrets takes the secrets (secretEnv) out of this process's
// environment, which worker processes inherit, and returns a getenv that
// still sees them.
func takeSecrets() func(string) string {
	kept := map[string]string{}
	for _, k := range secretEnv {
		if v, ok := os.LookupEnv(k); ok {
			kept[k] = v
			_ = os.Unsetenv(k)
		}
	}
	return func(k string) string {
		if v, ok := kept[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}
