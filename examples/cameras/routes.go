package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

//go:embed web
var webFS embed.FS

// routes is the whole HTTP surface of an instance.
func (s *Server) routes() http.Handler {
	static, _ := fs.Sub(webFS, "web")
	mux := http.NewServeMux()

	// The page.
	mux.Handle("GET /{$}", fileHandler(static, "index.html"))
	mux.Handle("GET /static/", http.StripPrefix("/static/", noCache(validName(http.FileServerFS(static)))))
	mux.Handle("GET /static/leasehttp.js", leasehttp.ClientScript())
	mux.Handle("GET /api/config", s.pageConfig())

	// The design's API (§8).
	mux.Handle("POST /api/modal/lease", s.api.Grant())
	mux.Handle("POST /api/modal/lease/{lease_id}/heartbeat", s.api.Heartbeat())
	mux.Handle("DELETE /api/modal/lease/{lease_id}", s.api.Release())
	mux.Handle("GET /api/system/status", s.api.Status())
	mux.Handle("GET /api/system/metrics", s.metricsHistory())

	// The pictures.
	mux.Handle("GET /api/cameras/{camera_id}/snapshot", s.streams.Snapshot())
	mux.Handle("GET /stream/suggest", s.streams.Suggest())
	mux.Handle("GET /stream/{camera_id}", s.streams.Modal())

	// Operations, without sessions.
	ops := http.NewServeMux()
	ops.Handle("GET /metrics", promhttp.HandlerFor(newRegistry(s.adm, s.streams), promhttp.HandlerOpts{}))
	ops.Handle("GET /healthz", s.healthz())
	ops.Handle("/", s.sessions.Middleware(mux))
	return webguard.Handler(ops, webguard.Options{Hosts: s.cfg.Hosts, Pages: true, Deny: s.refuse})
}

// refuse answers what webguard keeps out: a Host the server does not answer
// to (a page under a DNS-rebinding name), or a request that a page of
// another site made the browser send — a write whatever its content type,
// and a read too, since even the status call counts a UI user and a
// session. Only a top-level navigation (a link to the page) passes.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	p := &leasehttp.Problem{Status: http.StatusForbidden, Code: CodeCrossOrigin, Message: MsgCrossOrigin, Err: err}
	if errors.Is(err, webguard.ErrHost) {
		p.Code, p.Message = CodeUnknownHost, MsgUnknownHost
	}
	s.api.Error(w, r, p)
}

// pageConfig serves GET /api/config: what the page needs to know.
func (s *Server) pageConfig() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"cameras":                s.cfg.Cameras,
			"heartbeat_interval_sec": s.cfg.HeartbeatInterval.Seconds(),
			"heartbeat_grace_sec":    s.cfg.HeartbeatGrace.Seconds(),
			"modal_ttl_sec":          s.cfg.ModalTTL.Seconds(),
			"modal_budget":           s.cfg.ModalBudget(),
			"suggest":                s.cfg.Suggest,
			"metrics_interval_sec":   s.cfg.MetricsInterval.Seconds(),
		})
	})
}

// metricsHistory serves GET /api/system/metrics?minutes=N (default 30, at
// most the retention): admission_metrics of every instance, one point per
// METRICS_INTERVAL_SEC, for the status panel.
func (s *Server) metricsHistory() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		minutes := 30
		if v := r.URL.Query().Get("minutes"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || time.Duration(n)*time.Minute > s.cfg.MetricsRetention {
				s.api.Error(w, r, &leasehttp.Problem{Status: http.StatusBadRequest, Code: "INVALID_ARGUMENT",
					Message: "minutes は 1 から保持期間までの整数にしてください"})
				return
			}
			minutes = n
		}
		rows, err := s.history.Since(r.Context(), time.Now().Add(-time.Duration(minutes)*time.Minute))
		if err != nil {
			s.api.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"interval_sec": s.cfg.MetricsInterval.Seconds(),
			"points":       buckets(rows, s.cfg.MetricsInterval),
		})
	})
}

// healthz serves GET /healthz: 200 when the store answers within 2 s.
func (s *Server) healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if _, err := s.leases.Usage(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("store unavailable\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

func fileHandler(fsys fs.FS, name string) http.Handler {
	return noCache(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, fsys, name)
	}))
}

// noCache makes browsers revalidate the page's files, so a restarted server's
// page is never mixed with an old script.
// validName answers 404 for a path that no file of an fs.FS can have (not
// UTF-8, say), which http.FileServerFS would answer with a 500.
func validName(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name != "" && !fs.ValidPath(name) {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		if strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
