package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/metrics"
)

// Registry returns a registry of the server's metrics: each database's
// keyspace (expiry.Map, through the metrics package, labelled db) and the
// server's connections and commands.
func (s *Server) Registry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for i, db := range s.dbs {
		if err := reg.Register(metrics.Map(db, metrics.Options{Namespace: "kvserver", Subsystem: "keyspace",
			ConstLabels: prometheus.Labels{"db": strconv.Itoa(i)}})); err != nil {
			return nil, err
		}
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvserver_connected_clients", Help: "Open client connections."}, func() float64 {
			s.connMu.Lock()
			defer s.connMu.Unlock()
			return float64(len(s.conns))
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvserver_connections_received_total", Help: "Client connections accepted."},
			func() float64 { return float64(s.connections.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvserver_commands_processed_total", Help: "Commands run."},
			func() float64 { return float64(s.commands.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// httpHandler serves /healthz and /metrics, to loopback names and
// addresses and the hosts given only, and to no other site's page.
func (s *Server) httpHandler(hosts []string) (http.Handler, error) {
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return webguard.Handler(mux, webguard.Options{Hosts: hosts}), nil
}

// serveHTTP serves the server's /healthz and /metrics on ln until ctx
// ends.
func (s *Server) serveHTTP(ctx context.Context, ln net.Listener, hosts []string) error {
	h, err := s.httpHandler(hosts)
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err = srv.Shutdown(sctx)
		<-done
		return err
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
