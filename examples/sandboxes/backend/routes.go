package backend

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
)

// MaxExecBody bounds the body of an exec request.
const MaxExecBody = 2 * agent.MaxCommand

// ExecRequest is the body of POST /conversations/{id}/exec.
type ExecRequest struct {
	Command    []string `json:"command"`
	TimeoutSec float64  `json:"timeout_sec,omitempty"`
}

// NewServer returns the backend's HTTP API, /metrics (from reg) and
// /healthz. With Config.APIKey, every request but GET /healthz must carry
// the key (X-Api-Key, or Authorization: Bearer). Before the key, every
// request, /healthz's too, must name a Host the API answers to (loopback
// names, IP addresses, Config.AllowedHosts) and must not be one a browser
// sends for another site, whatever its method or content type: 403, and
// nothing happens.
func NewServer(b *Backend, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /conversations/{id}/exec", execHandler(b))
	mux.Handle("GET /conversations/{id}", stateHandler(b))
	mux.Handle("DELETE /conversations/{id}", deleteHandler(b))
	mux.Handle("GET /conversations/{id}/files/{path...}", readFileHandler(b))
	mux.Handle("PUT /conversations/{id}/files/{path...}", writeFileHandler(b))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if b.closed.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "instance": b.cfg.Instance, "sandboxes": b.cfg.Provisioner.Kind()})
	}))
	h := canonical(mux)
	if b.cfg.APIKey != "" {
		h = withKey(b.cfg.APIKey, h)
	}
	// The API serves no pages: a navigation from another site is refused
	// like the rest.
	return webguard.Handler(h, webguard.Options{Hosts: b.cfg.AllowedHosts, Deny: refuse})
}

// refuse answers a request webguard refused.
func refuse(w http.ResponseWriter, _ *http.Request, err error) {
	if errors.Is(err, webguard.ErrHost) {
		err = fmt.Errorf("%w: the API answers loopback names, IP addresses and the allowed hosts (-allowed-hosts, $SANDBOXES_ALLOWED_HOSTS)", err)
	}
	writeError(w, http.StatusForbidden, err)
}

// canonical refuses a request whose path has "." or ".." segments or
// empty ones, as written or percent-encoded, rather than let the mux
// redirect it to the cleaned path: a client that follows the redirect
// (a 307, which keeps the method and the body) would read or write
// conversation b's files for /conversations/a/files/../../b/files/x.
func canonical(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		c := path.Clean(p)
		if strings.HasSuffix(p, "/") && c != "/" {
			c += "/"
		}
		if c != p {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%w: path %q has '.', '..' or empty segments", ErrInvalid, p))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withKey refuses the requests that do not carry key, but GET /healthz.
// The key is compared as a SHA-256 digest in constant time.
func withKey(key string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		given := r.Header.Get("X-Api-Key")
		if auth := r.Header.Get("Authorization"); given == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "Bearer ") {
			given = strings.TrimSpace(auth[7:])
		}
		got := sha256.Sum256([]byte(given))
		switch {
		case given == "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxes"`)
			writeError(w, http.StatusUnauthorized, errors.New("an API key is required: X-Api-Key, or Authorization: Bearer"))
		case subtle.ConstantTimeCompare(got[:], want[:]) != 1:
			writeError(w, http.StatusForbidden, errors.New("the API key is not valid"))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func execHandler(b *Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The id first: a request for no conversation is not read.
		if err := CheckConversation(r.PathValue("id")); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		var req ExecRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxExecBody))
		dec.DisallowUnknownFields()
		err := dec.Decode(&req)
		if err == nil {
			// One request and nothing more (to the end of the body, whose
			// size is bounded too).
			if _, tail := dec.Token(); tail != io.EOF {
				err = cmp.Or(tail, errors.New("more after the exec request"))
			}
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("exec: the request is over %d bytes (a command may have at most %d)", MaxExecBody, agent.MaxCommand))
				return
			}
			writeError(w, http.StatusBadRequest, fmt.Errorf(`exec: the body must be one {"command": ["sh", "-c", "..."], "timeout_sec": N}: %v`, err))
			return
		}
		timeout, err := b.timeoutOf(req.TimeoutSec)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		res, err := b.Exec(r.Context(), r.PathValue("id"), req.Command, timeout)
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

func stateHandler(b *Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := b.State(r.Context(), r.PathValue("id"))
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		writeJSON(w, http.StatusOK, s)
	})
}

func deleteHandler(b *Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := b.Delete(r.Context(), r.PathValue("id")); err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func readFileHandler(b *Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := b.File(r.Context(), r.PathValue("id"), r.PathValue("path"))
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		defer resp.Body.Close()
		for _, h := range []string{"Content-Type", "Content-Length"} {
			if v := resp.Header.Get(h); v != "" {
				w.Header().Set(h, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}

func writeFileHandler(b *Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := b.WriteFile(r.Context(), r.PathValue("id"), r.PathValue("path"), r.Body, r.ContentLength)
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// statusOf maps an error to its HTTP status.
func statusOf(err error) int {
	var aerr *agent.Error
	switch {
	case errors.As(err, &aerr):
		return aerr.Status
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrDraining), errors.Is(err, ErrBusy), errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrSandboxDied):
		return http.StatusBadGateway
	case errors.Is(err, context.Canceled):
		return 499 // the client went away; nobody reads this
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, err error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
