package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
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
	mux.Handle("GET /{$}", s.page())
	mux.Handle("GET /static/", http.StripPrefix("/static/", noCache(validName(http.FileServerFS(static)))))
	mux.Handle("GET /static/leasehttp.js", leasehttp.ClientScript())
	mux.Handle("GET /api/config", s.pageConfig())

	// The design's API (§8).
	mux.Handle("POST /api/modal/lease", s.api.Grant())
	mux.Handle("POST /api/modal/lease/{lease_id}/heartbeat", s.api.Heartbeat())
	mux.Handle("DELETE /api/modal/lease/{lease_id}", s.api.Release())
	mux.Handle("GET /api/system/status", s.api.Status())
	mux.Handle("GET /api/system/metrics", s.metricsHistory())
	mux.Handle("DELETE /api/ui/seat/{seat_id}", s.leaveSeat())

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
	p := problem(r, http.StatusForbidden, CodeCrossOrigin)
	if errors.Is(err, webguard.ErrHost) {
		p = problem(r, http.StatusForbidden, CodeUnknownHost)
	}
	p.Err = err
	s.api.Error(w, r, p)
}

// page serves the page in the request's language (lang.go), and remembers
// a language picked with the page's switch (?lang=).
func (s *Server) page() http.Handler {
	return noCache(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setLangCookie(w, r)
		l := langOf(r)
		var b bytes.Buffer
		if err := pageTemplate.Execute(&b, pageData{Lang: l, T: textsIn(l), Langs: langs}); err != nil {
			s.api.Error(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Language", string(l))
		w.Header().Add("Vary", "Accept-Language, Cookie")
		_, _ = w.Write(b.Bytes())
	}))
}

// leaveSeat serves DELETE /api/ui/seat/{seat_id}: the page gives its UI
// user seat back when it goes away or to the background. Only the seat's
// session can; any other answer changes nothing, so it is always 200.
func (s *Server) leaveSeat() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		holder, err := Holder(r)
		if err != nil || s.seats == nil {
			writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
			return
		}
		// The streams first, so that none plays on once another user
		// can have the seat.
		id := r.PathValue("seat_id")
		s.streams.EndSuggest(id, holder)
		if err := s.seats.Leave(r.Context(), holder, id); err != nil {
			s.api.Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
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
			"max_ui_users":           s.cfg.MaxSeats(),
			"lang":                   langOf(r),
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
				p := problem(r, http.StatusBadRequest, "INVALID_ARGUMENT")
				p.Message = message(langOf(r), "INVALID_MINUTES")
				s.api.Error(w, r, p)
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
		if _, _, err := s.leases.Usage(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("store unavailable\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

// pageTemplate is index.html, whose texts are in the request's language.
var pageTemplate = template.Must(template.ParseFS(webFS, "web/index.html"))

// pageData is what index.html is rendered with.
type pageData struct {
	Lang  Lang
	T     map[string]string
	Langs []Lang
}

// noCache makes browsers revalidate the page's files, so a restarted server's
// page is never mixed with an old script.
// validName answers 404 for a path that no file of an fs.FS can have (not
// UTF-8, say), which http.FileServerFS would answer with a 500, and for
// index.html, the page's template, which only / serves (rendered).
func validName(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" || name == "." || name == "index.html" || !fs.ValidPath(name) {
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
