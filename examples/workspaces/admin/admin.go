// Package admin is the operators' side of the system, under /admin/: a
// page that lists the workspaces as they change (phase, last activity, the
// time left before standby or archive) and creates and deletes them, and
// the JSON API it uses:
//
//	GET    /admin/api/workspaces[?after=ID&limit=N]  list (id order, paged)
//	POST   /admin/api/workspaces {"id":"demo"}       create (id optional); returns a link for its owner
//	GET    /admin/api/workspaces/{id}                one
//	POST   /admin/api/workspaces/{id}/link           a new link for its owner
//	DELETE /admin/api/workspaces/{id}                soft delete (stopped, files archived)
//
// Every request needs the admin token: Authorization: Bearer <token>, or
// the cookie the page gets when opened as /admin/?token=<token>. Reading
// the admin API is not activity of any workspace.
package admin

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
)

//go:embed web
var webFS embed.FS

// Cookie names the admin page's cookie.
const Cookie = "workspaces_admin"

// Defaults and bounds.
const (
	DefaultLimit    = 200
	MaxLimit        = 1000
	DefaultTokenTTL = 24 * time.Hour
	sessionTTL      = 12 * time.Hour
	maxBody         = 1 << 10
)

// Options configure the admin handler. Catalog and Keys are required.
type Options struct {
	Catalog *catalog.Catalog
	Keys    *auth.Keys
	// Standby and Archive are the TTLs, to tell how long each workspace
	// has left.
	Standby, Archive time.Duration
	// TokenTTL is how long a workspace link opens it. 0 means
	// DefaultTokenTTL.
	TokenTTL time.Duration
	// DeleteWait is how long a DELETE waits for the controller to stop
	// the workspace's server before it answers 202 instead of 200. 0
	// means DefaultDeleteWait.
	DeleteWait time.Duration
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultDeleteWait is the DeleteWait when none is given.
const DefaultDeleteWait = 10 * time.Second

// Handler serves /admin/.
type Handler struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	xo   *http.CrossOriginProtection
}

// New returns the admin handler.
func New(opts Options) (*Handler, error) {
	if opts.Catalog == nil || opts.Keys == nil {
		return nil, errors.New("admin: Catalog and Keys are required")
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.DeleteWait <= 0 {
		opts.DeleteWait = DefaultDeleteWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: opts, log: opts.Logger, mux: http.NewServeMux(), xo: http.NewCrossOriginProtection()}
	static, _ := fs.Sub(webFS, "web")
	h.mux.HandleFunc("GET /admin/{$}", h.page(static))
	// The page's script and style hold nothing secret; the sign-in page
	// needs the style.
	h.mux.HandleFunc("GET /admin/static/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if _, err := fs.Stat(static, name); err != nil || !fs.ValidPath(name) || strings.HasSuffix(name, ".html") {
			problem(w, http.StatusNotFound, "no such file")
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, name)
	})
	h.mux.Handle("GET /admin/api/workspaces", h.authed(http.HandlerFunc(h.list)))
	h.mux.Handle("POST /admin/api/workspaces", h.authed(http.HandlerFunc(h.create)))
	h.mux.Handle("GET /admin/api/workspaces/{id}", h.authed(http.HandlerFunc(h.get)))
	h.mux.Handle("POST /admin/api/workspaces/{id}/link", h.authed(http.HandlerFunc(h.link)))
	h.mux.Handle("DELETE /admin/api/workspaces/{id}", h.authed(http.HandlerFunc(h.remove)))
	h.mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusNotFound, "no such admin page or API")
	})
	return h, nil
}

// ServeHTTP serves the admin page and API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// authorized reports whether r carries the admin token or a valid admin
// cookie.
func (h *Handler) authorized(r *http.Request) bool {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return h.opts.Keys.CheckAdminToken(strings.TrimSpace(t)) == nil
	}
	c, err := r.Cookie(Cookie)
	return err == nil && h.opts.Keys.CheckAdminCookie(c.Value) == nil
}

// authed lets through only authorized requests, and of those only
// same-site ones when they change something (the cookie is SameSite=Strict
// too; this also covers browsers that ignore it).
func (h *Handler) authed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="workspaces admin"`)
			problem(w, http.StatusUnauthorized, "the admin API needs the admin token (Authorization: Bearer ...)")
			return
		}
		if err := h.xo.Check(r); err != nil {
			problem(w, http.StatusForbidden, "cross-site requests are refused")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// page serves /admin/: with ?token=, it checks the token, sets the admin
// cookie and redirects to /admin/ (the token leaves the address bar); with
// a valid cookie, the page; else a sign-in form.
func (h *Handler) page(static fs.FS) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if t := r.URL.Query().Get("token"); t != "" {
			if h.opts.Keys.CheckAdminToken(t) != nil {
				w.WriteHeader(http.StatusForbidden)
				http.ServeFileFS(&statusKeeper{w}, r, static, "login.html")
				return
			}
			exp := time.Now().Add(sessionTTL)
			http.SetCookie(w, &http.Cookie{Name: Cookie, Value: h.opts.Keys.AdminCookie(exp), Path: "/admin/", Expires: exp,
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			http.Redirect(w, r, "/admin/", http.StatusSeeOther)
			return
		}
		if !h.authorized(r) {
			w.WriteHeader(http.StatusUnauthorized)
			http.ServeFileFS(&statusKeeper{w}, r, static, "login.html")
			return
		}
		http.ServeFileFS(w, r, static, "index.html")
	}
}

// statusKeeper keeps the status already written: ServeFileFS would write
// 200 again.
type statusKeeper struct{ http.ResponseWriter }

// WriteHeader does nothing: the status is written already.
func (s *statusKeeper) WriteHeader(int) {}

// Workspace is one workspace in the API.
type Workspace struct {
	ID             string     `json:"id"`
	Phase          string     `json:"phase"`
	DesiredState   string     `json:"desired_state"`
	Operation      string     `json:"operation"`
	LastAccessAt   time.Time  `json:"last_access_at"`
	PhaseChangedAt time.Time  `json:"phase_changed_at"`
	CreatedAt      time.Time  `json:"created_at"`
	DeletedAt      *time.Time `json:"deleted_at,omitempty"`
	// StandbyAt is when a RUNNING workspace goes to STANDBY if it stays
	// idle (as of the last sync of its activity); ArchiveAt when a
	// STANDBY one is archived.
	StandbyAt *time.Time `json:"standby_at,omitempty"`
	ArchiveAt *time.Time `json:"archive_at,omitempty"`
}

func (h *Handler) view(e entities.Entity) Workspace {
	w := Workspace{ID: e.ID, Phase: e.Phase, DesiredState: e.DesiredState, Operation: e.Operation,
		LastAccessAt: e.LastActivityAt, PhaseChangedAt: e.PhaseChangedAt, CreatedAt: e.CreatedAt}
	if !e.DeletedAt.IsZero() {
		w.DeletedAt = &e.DeletedAt
		return w
	}
	switch e.Phase {
	case catalog.Running:
		t := e.LastActivityAt.Add(h.opts.Standby)
		w.StandbyAt = &t
	case catalog.Standby:
		t := e.PhaseChangedAt.Add(h.opts.Archive)
		w.ArchiveAt = &t
	}
	return w
}

// List is the answer of GET /admin/api/workspaces.
type List struct {
	Workspaces []Workspace `json:"workspaces"`
	// Next, if not empty, is the after= of the next page.
	Next           string    `json:"next,omitempty"`
	Now            time.Time `json:"now"`
	StandbySeconds float64   `json:"standby_seconds"`
	ArchiveSeconds float64   `json:"archive_seconds"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			problem(w, http.StatusBadRequest, "limit must be a number from 1 to "+strconv.Itoa(MaxLimit))
			return
		}
		limit = n
	}
	after := q.Get("after")
	if after != "" && !catalog.ValidID(after) {
		problem(w, http.StatusBadRequest, "after must be a workspace id")
		return
	}
	es, err := h.opts.Catalog.List(r.Context(), after, limit)
	if err != nil {
		h.failed(w, r, err)
		return
	}
	out := List{Workspaces: make([]Workspace, len(es)), Now: time.Now().UTC(),
		StandbySeconds: h.opts.Standby.Seconds(), ArchiveSeconds: h.opts.Archive.Seconds()}
	for i, e := range es {
		out.Workspaces[i] = h.view(e)
	}
	if len(es) == limit {
		out.Next = es[len(es)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// Created is the answer of POST /admin/api/workspaces and of a new link:
// the workspace, and the link its owner opens it with.
type Created struct {
	Workspace Workspace `json:"workspace"`
	// URL opens the workspace (path and query: prefix the proxy's
	// address). Token is the same credential, for an Authorization:
	// Bearer header.
	URL       string    `json:"url"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID string `json:"id"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		problem(w, http.StatusRequestEntityTooLarge, "the request body is larger than 1 KiB")
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || dec.More() {
			problem(w, http.StatusBadRequest, `the body must be {"id": "..."} or empty`)
			return
		}
	}
	if req.ID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		req.ID = "ws-" + hex.EncodeToString(b[:])
	}
	if !catalog.ValidID(req.ID) {
		problem(w, http.StatusBadRequest, "id must be 1 to 40 lower-case letters, digits and '-', not starting with '-'")
		return
	}
	e, err := h.opts.Catalog.Create(r.Context(), req.ID)
	if errors.Is(err, catalog.ErrExists) {
		problem(w, http.StatusConflict, "workspace "+req.ID+" exists")
		return
	}
	if err != nil {
		h.failed(w, r, err)
		return
	}
	h.log.Info("admin: workspace created", "workspace", e.ID)
	writeJSON(w, http.StatusCreated, h.created(e))
}

func (h *Handler) created(e entities.Entity) Created {
	exp := time.Now().Add(h.opts.TokenTTL).Truncate(time.Second)
	tok := h.opts.Keys.WorkspaceToken(e.ID, exp)
	return Created{Workspace: h.view(e), URL: "/" + e.ID + "/?token=" + url.QueryEscape(tok), Token: tok, ExpiresAt: exp.UTC()}
}

// workspace returns the workspace the path names, or answers and returns
// false.
func (h *Handler) workspace(w http.ResponseWriter, r *http.Request) (entities.Entity, bool) {
	e, err := h.opts.Catalog.Get(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, catalog.ErrInvalidID), errors.Is(err, catalog.ErrNotFound):
		problem(w, http.StatusNotFound, "no such workspace")
		return e, false
	case err != nil:
		h.failed(w, r, err)
		return e, false
	}
	return e, true
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	if e, ok := h.workspace(w, r); ok {
		writeJSON(w, http.StatusOK, h.view(e))
	}
}

func (h *Handler) link(w http.ResponseWriter, r *http.Request) {
	e, ok := h.workspace(w, r)
	if !ok {
		return
	}
	if !e.DeletedAt.IsZero() {
		problem(w, http.StatusGone, "workspace "+e.ID+" was deleted")
		return
	}
	c := h.created(e)
	// A link opens the workspace until it expires, and cannot be taken
	// back but by a new secret: the log keeps when each was handed out.
	h.log.Info("admin: new link", "workspace", e.ID, "expires_at", c.ExpiresAt)
	writeJSON(w, http.StatusOK, c)
}

func (h *Handler) remove(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.workspace(w, r); !ok {
		return
	}
	e, err := h.opts.Catalog.Delete(r.Context(), r.PathValue("id"))
	if err != nil {
		h.failed(w, r, err)
		return
	}
	h.log.Info("admin: workspace deleted", "workspace", e.ID)
	// The proxies serve a running workspace from its route alone: it is
	// gone for its owner once the controller has stopped its server. The
	// answer waits for that, so that after a 200 no request reaches it; a
	// 202 says the deletion stands but the server still runs (no
	// controller took it within DeleteWait).
	e, stopped := h.waitStopped(r.Context(), e)
	if !stopped {
		writeJSON(w, http.StatusAccepted, h.view(e))
		return
	}
	writeJSON(w, http.StatusOK, h.view(e))
}

// waitStopped waits, up to DeleteWait or until ctx ends, until workspace
// e's server no longer runs, and returns its row as last read.
func (h *Handler) waitStopped(ctx context.Context, e entities.Entity) (entities.Entity, bool) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.DeleteWait)
	defer cancel()
	tick := time.NewTicker(deletePoll)
	defer tick.Stop()
	for {
		if !serving(e) {
			return e, true
		}
		select {
		case <-ctx.Done():
			return e, false
		case <-tick.C:
		}
		if got, err := h.opts.Catalog.Get(ctx, e.ID); err == nil {
			e = got
		}
	}
}

// deletePoll is how often a DELETE reads the row while it waits.
const deletePoll = 20 * time.Millisecond

// serving reports whether workspace e's server may run: it is running,
// starting or being stopped.
func serving(e entities.Entity) bool {
	return e.Phase == catalog.Running || e.Operation == catalog.OpStarting || e.Operation == catalog.OpStopping
}

func (h *Handler) failed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	h.log.Warn("admin: store failed", "path", r.URL.Path, "err", err)
	problem(w, http.StatusServiceUnavailable, "the workspaces table cannot be reached")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// problem answers {"error": msg}.
func problem(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
