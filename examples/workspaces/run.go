package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/examples/workspaces/workspace"
)

// shutdownTimeout bounds a graceful shutdown.
const shutdownTimeout = 30 * time.Second

// envWorkspaceKey gives a workspace's server its backend key.
const envWorkspaceKey = "WORKSPACE_KEY"

// run is the program: the component args[0] names (all of them without
// one, or "workspace", the server of one workspace, which the controller
// starts), until ctx ends (SIGINT, SIGTERM); then a graceful shutdown.
// Logs go to stderr; stdout gets the line a user needs.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "workspace" {
		return runWorkspace(ctx, args[1:], getenv, stderr)
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return serve(ctx, cfg, Deps{}, log, stdout)
}

// serve starts cfg's components, says where they are, and shuts them down
// when ctx ends.
func serve(ctx context.Context, cfg Config, deps Deps, log *slog.Logger, stdout io.Writer) error {
	sys, err := Start(ctx, cfg, deps, log)
	if err != nil {
		return err
	}
	backend := "memory"
	if cfg.PostgresURL != "" {
		backend = "postgres"
		if cfg.RedisURL != "" {
			backend += "+redis"
		}
	}
	log.Info("workspaces: serving", "component", cfg.Component, "addr", sys.Addr(), "backend", backend,
		"standby", cfg.Standby, "archive", cfg.Archive, "flush_interval", cfg.FlushInterval, "tick_interval", cfg.TickInterval)
	switch {
	case sys.proxy != nil && cfg.Generated:
		fmt.Fprintf(stdout, "workspaces: admin page http://%s/admin/?token=%s\n", sys.Addr(), cfg.AdminToken)
	case sys.proxy != nil:
		fmt.Fprintf(stdout, "workspaces: admin page http://%s/admin/ (sign in with ADMIN_TOKEN)\n", sys.Addr())
	default:
		fmt.Fprintf(stdout, "workspaces: %s serving /metrics and /healthz on http://%s\n", cfg.Component, sys.Addr())
	}
	<-ctx.Done()
	log.Info("workspaces: shutting down", "component", cfg.Component)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err = sys.Shutdown(sctx)
	log.Info("workspaces: stopped", "err", err)
	return err
}

// runWorkspace serves one workspace's IDE until ctx ends: the process the
// controller starts for a RUNNING workspace.
func runWorkspace(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("workspaces workspace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "the workspace's id")
	dir := fs.String("dir", "", "the workspace's directory")
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("workspace", *id)
	srv, err := workspace.New(workspace.Options{ID: *id, Dir: *dir, Key: getenv(envWorkspaceKey), Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		_ = srv.Close()
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = hs.Shutdown(sctx)
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}
	return errors.Join(err, srv.Close())
}
