package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// shutdownTimeout bounds a graceful shutdown.
const shutdownTimeout = 10 * time.Second

// run is the program: it reads the settings from args and getenv, serves
// until ctx ends (SIGINT, SIGTERM), then shuts down gracefully: it stops
// accepting, ends the streams, waits for the requests in flight and stops
// the loops. Logs go to stderr; stdout gets the one line a user needs.
func run(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))

	backend, err := openBackend(ctx, cfg)
	if err != nil {
		return fmt.Errorf("store %s: %w", cfg.Store, err)
	}
	defer func() { _ = backend.Close() }()
	srv, err := NewServer(cfg, Deps{Backend: backend, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = srv.Close(context.Background())
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(srv.StopStreams)
	log.Info("cameras: listening", "addr", ln.Addr().String(), "store", cfg.Store,
		"modal_budget", cfg.ModalBudget(), "cameras", len(cfg.Cameras))
	fmt.Fprintf(stdout, "cameras: open http://%s\n", ln.Addr())

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		log.Info("cameras: shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		err = hs.Shutdown(sctx)
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = errors.Join(err, srv.Close(cctx))
	log.Info("cameras: stopped")
	return err
}
