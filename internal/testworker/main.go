// Command testworker is the worker program of ttlkit's provisioner tests: a
// small HTTP server, built as a static binary so that it runs in a
// container image FROM scratch.
//
// It listens on $ADDR (default ":8080"), answers /healthz with 200 and any
// other path with its hostname, and exits 0 on SIGTERM. With
// $EXIT_CODE set it exits at once with that code instead.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	if v := os.Getenv("EXIT_CODE"); v != "" {
		code, _ := strconv.Atoi(v)
		os.Exit(code)
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })
	srv := &http.Server{Addr: addr, Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "testworker:", err)
		os.Exit(1)
	}
}
