package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
)

import "github.com/ttlkit/ttlkit/examples/gateway/agent"

// runAgent serves the agent over gRPC until ctx ends.
func runAgent(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:50051", "gRPC address")
	label := fs.String("label", "ttlkit-gateway", "label of the workers")
	docker := fs.String("docker", "", "Docker engine for image functions")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := logger(*level, stderr)
	if err != nil {
		return err
	}
	a, closeAgent, err := newLocalAgent(*label, *docker, stderr)
	if err != nil {
		return err
	}
	defer closeAgent()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := agent.NewServer(a)
	done := make(chan error, 1)
	go func() { done <- agent.Serve(srv, ln) }()
	log.Info("agent listening", "addr", ln.Addr().String(), "label", *label)
	fmt.Fprintf(stdout, "agent listening on %s\n", ln.Addr())
	select {
	case <-ctx.Done():
		srv.GracefulStop()
		<-done
		return nil
	case err := <-done:
		return err
	}
}
