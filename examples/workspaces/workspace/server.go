// Package workspace is the server of one workspace: the process the
// controller starts for it, serving a small IDE over HTTP from the
// workspace's own directory. The page has an editor that lists, opens and
// saves files (plain HTTP requests) and a terminal (a WebSocket that echoes
// what is typed and streams the output of a few commands; no real shell).
//
// The server listens on loopback and answers only requests that carry the
// workspace's backend key (KeyHeader), which the proxy adds: users reach it
// through the proxy, never around it. And only requests for an IP address
// or a loopback name, as the proxy sends them: a page under a DNS-rebinding
// name is refused before the key is even looked at.
package workspace

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
)

// KeyHeader carries the workspace's backend key on every request.
const KeyHeader = "X-Workspace-Key"

// MaxFile bounds a saved file.
const MaxFile = 1 << 20

//go:embed web
var webFS embed.FS

// nameRE is what a file name looks like: the editor keeps files in one
// directory, so a name never has a path separator, and never starts with a
// dot (no hidden files, no "..").
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$`)

// ValidName reports whether name can name a file of the workspace.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Options configure a Server.
type Options struct {
	// ID is the workspace's id, shown on the page. Required.
	ID string
	// Dir is the workspace's directory. Required; it must exist.
	Dir string
	// Key is the backend key every request must carry in KeyHeader. Empty
	// means none is required (tests only).
	Key string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Server is one workspace's IDE server. Close it to end its terminals.
type Server struct {
	opts    Options
	root    *os.Root
	handler http.Handler // the checks, then routes
	routes  http.Handler
	log     *slog.Logger

	ctx    context.Context // ends the terminals
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the server of the workspace in opts.Dir.
func New(opts Options) (*Server, error) {
	if opts.ID == "" || opts.Dir == "" {
		return nil, errors.New("workspace: ID and Dir are required")
	}
	root, err := os.OpenRoot(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, root: root, log: log, ctx: ctx, cancel: cancel}
	// The proxy reaches the server at its address (127.0.0.1:port), so no
	// name needs configuring. Which sites' pages may send what the proxy
	// decides (ALLOWED_ORIGINS); it passes the browser's Origin and
	// Sec-Fetch-Site on, which name the proxy's origin, not this one.
	s.handler = webguard.Handler(http.HandlerFunc(s.serve), webguard.Options{AnySite: true})
	s.routes = s.mux()
	return s, nil
}

// ServeHTTP serves the IDE, after checking the Host (an address or a
// loopback name, else 403) and the backend key: without one it answers
// 403; with another workspace's, 421 Misdirected Request (a proxy that
// reached this server at an address another workspace's server had
// before: it looks for the route again).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// serve checks the backend key and serves the IDE.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.opts.Key != "" {
		switch key := r.Header.Get(KeyHeader); {
		case key == "":
			http.Error(w, "this workspace is reached through its proxy", http.StatusForbidden)
			return
		case subtle.ConstantTimeCompare([]byte(key), []byte(s.opts.Key)) != 1:
			http.Error(w, "this is another workspace's server", http.StatusMisdirectedRequest)
			return
		}
	}
	s.routes.ServeHTTP(w, r)
}

// Close ends every terminal, waits for them and releases the directory.
func (s *Server) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.root.Close()
}

func (s *Server) mux() http.Handler {
	static, _ := fs.Sub(webFS, "web")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /static/{name}", func(w http.ResponseWriter, r *http.Request) {
		// Only the page's own files; FileServerFS would answer 500 to a
		// name an embedded file system calls invalid (not UTF-8).
		name := r.PathValue("name")
		if _, err := fs.Stat(static, name); err != nil || !fs.ValidPath(name) || name == "index.html" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, name)
	})
	mux.HandleFunc("GET /api/info", s.info)
	mux.HandleFunc("GET /api/files", s.list)
	mux.HandleFunc("GET /api/files/{name}", s.read)
	mux.HandleFunc("PUT /api/files/{name}", s.write)
	mux.HandleFunc("DELETE /api/files/{name}", s.remove)
	mux.HandleFunc("GET /terminal", s.terminal)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

// File is one entry of the file list.
type File struct {
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"id": s.opts.ID})
}

// files lists the workspace's files, by name.
func (s *Server) files() ([]File, error) {
	d, err := s.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := []File{}
	for _, e := range ents {
		if !e.Type().IsRegular() || !ValidName(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, File{Name: e.Name(), Size: info.Size(), Modified: info.ModTime().UTC()})
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	fs, err := s.files()
	if err != nil {
		s.log.Error("workspace: list files", "err", err)
		http.Error(w, "cannot list files", http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, fs)
}

// name returns the request's file name, or answers 400 and returns "".
func name(w http.ResponseWriter, r *http.Request) string {
	n := r.PathValue("name")
	if !ValidName(n) {
		http.Error(w, "a file name is 1 to 100 letters, digits, '.', '_' and '-', not starting with '.' or '-'", http.StatusBadRequest)
		return ""
	}
	return n
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) {
	n := name(w, r)
	if n == "" {
		return
	}
	b, err := s.root.ReadFile(n)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "no such file", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "cannot read the file", http.StatusBadRequest) // a directory, say
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func (s *Server) write(w http.ResponseWriter, r *http.Request) {
	n := name(w, r)
	if n == "" {
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxFile))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		http.Error(w, fmt.Sprintf("a file holds at most %d bytes", MaxFile), http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return
	}
	// Written whole, then renamed over the old one: a reader never sees
	// half a file, and a crash leaves the old one.
	tmp := ".save-" + n
	if err := s.root.WriteFile(tmp, b, 0o644); err != nil {
		s.log.Error("workspace: save", "file", n, "err", err)
		http.Error(w, "cannot save the file", http.StatusInternalServerError)
		return
	}
	if err := s.root.Rename(tmp, n); err != nil {
		_ = s.root.Remove(tmp)
		http.Error(w, "cannot save the file", http.StatusConflict) // n is a directory
		return
	}
	writeJSON(w, http.StatusOK, File{Name: n, Size: int64(len(b)), Modified: time.Now().UTC()})
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	n := name(w, r)
	if n == "" {
		return
	}
	err := s.root.Remove(n)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "no such file", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "cannot delete the file", http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
