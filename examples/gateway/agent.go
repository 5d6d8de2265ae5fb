package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
)

// runAgent serves the agent over gRPC until ctx ends.
func runAgent(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("listen", "127.0.0.1:50051", "gRPC address: host:port, or unix:/path for a socket only this user may use")
	label := fs.String("label", "ttlkit-gateway", "label of the workers")
	docker := fs.String("docker", "", "Docker engine for image functions")
	token := fs.String("token", "", "token every call must carry; default $"+envAgentToken+"; required on TCP but loopback, and on TCP with -docker")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	*token = cmp.Or(*token, getenv(envAgentToken))
	log, err := logger(*level, stderr)
	if err != nil {
		return err
	}
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	// Whoever calls Create runs any command as this user: on TCP, a token
	// is required unless only this machine reaches the address, and even
	// then when containers run with the host's network, which reach its
	// loopback.
	if *token == "" {
		_, unix := ln.Addr().(*net.UnixAddr)
		switch {
		case !loopback(ln.Addr()):
			ln.Close()
			return errors.New("agent: -listen " + *addr + " is reachable from other machines: set a token (" + envAgentToken + " or -token)")
		case *docker != "" && !unix:
			ln.Close()
			return errors.New("agent: with -docker, containers share the host's network and reach -listen " + *addr + ": set a token (" + envAgentToken + " or -token) or listen on a unix socket")
		}
	}
	a, closeAgent, err := newLocalAgent(*label, *docker, stderr, nil)
	if err != nil {
		ln.Close()
		return err
	}
	defer closeAgent()
	srv := agent.NewServer(a, *token)
	done := make(chan error, 1)
	go func() { done <- agent.Serve(srv, ln) }()
	log.Info("agent listening", "addr", addrString(ln.Addr()), "label", *label, "token", *token != "")
	fmt.Fprintf(stdout, "agent listening on %s\n", addrString(ln.Addr()))
	select {
	case <-ctx.Done():
		srv.GracefulStop()
		<-done
		return nil
	case err := <-done:
		return err
	}
}
