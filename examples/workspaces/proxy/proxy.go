// Package proxy is the workspace proxy: it serves /{workspace_id}/... by
// relaying HTTP requests and WebSocket messages to the workspace's own
// server, and records the workspace's activity as it goes, exactly as the
// design counts it:
//
//	HTTP request                          activity
//	WebSocket connect                     activity
//	WebSocket message, either direction   activity (typing, terminal output)
//	an open WebSocket with no messages    not activity (a tab left open)
//
// Recording is ttl.Tracker.Record, an in-memory write; the tracker flushes
// to the shared buffer every ACTIVITY_FLUSH_INTERVAL.
//
// Only the workspace's owner gets through: every request needs the
// workspace's token (a link's ?token=, kept in a cookie scoped to the
// workspace's path, or an Authorization: Bearer header); requests that
// pages of other sites make the browser send are refused, WebSocket
// upgrades, writes and reads alike (every request is activity), but for a
// link followed to the IDE. A refused request is not activity and wakes
// nothing.
//
// A request for a workspace that is not running (STANDBY, ARCHIVED, or
// being stopped) asks for it to run and is held until its server answers,
// up to StartTimeout; then it gets a page that says so.
package proxy

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/workspace"
)

// Routes finds where a running workspace's server listens. Any error means
// it is not running (or not reachable) now.
type Routes interface {
	Route(ctx context.Context, id string) (addr string, err error)
}

// Recorder records activity; a ttl.Tracker is one.
type Recorder interface {
	Record(id string)
}

// TokenCookie names the cookie that keeps a workspace's token, one per
// workspace path.
const TokenCookie = "workspace_token"

// Defaults of Options.
const (
	DefaultStartTimeout  = 60 * time.Second
	DefaultPollInterval  = 100 * time.Millisecond
	DefaultRouteCacheTTL = time.Second
	DefaultMaxMessage    = 1 << 20
)

// Options configure a Proxy. Catalog, Routes, Recorder and Keys are
// required.
type Options struct {
	Catalog  *catalog.Catalog
	Routes   Routes
	Recorder Recorder
	Keys     *auth.Keys
	// StartTimeout bounds how long a request waits for its workspace to
	// start. 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// PollInterval is how often a held request looks for the workspace's
	// route. 0 means DefaultPollInterval.
	PollInterval time.Duration
	// RouteCacheTTL is how long a route is reused without reading it
	// again. 0 means DefaultRouteCacheTTL; negative reads it every time.
	RouteCacheTTL time.Duration
	// OriginPatterns are the origins, besides the proxy's own host, whose
	// pages may open a workspace's WebSocket or send it requests (host
	// patterns as path.Match, or scheme://host; state-changing requests
	// only from a scheme://host without wildcards, which
	// http.CrossOriginProtection trusts).
	OriginPatterns []string
	// MaxMessage bounds one WebSocket message, either way. 0 means
	// DefaultMaxMessage (1 MiB).
	MaxMessage int64
	// Transport reaches the workspaces' servers; nil means a Transport of
	// its own.
	Transport http.RoundTripper
	// Logger receives the proxy's logs; nil discards them.
	Logger *slog.Logger
}

// Stats counts what a Proxy did.
type Stats struct {
	// Requests is the number of HTTP requests relayed or held (WebSocket
	// upgrades included): each one activity.
	Requests uint64
	// WebSockets is the number of WebSocket connections relayed; Open the
	// number open now.
	WebSockets uint64
	Open       int64
	// MessagesIn and MessagesOut count WebSocket messages from the
	// browser and from the workspace: each one activity.
	MessagesIn, MessagesOut uint64
	// Held is the number of requests that waited for their workspace to
	// start; HoldTimeouts those that waited in vain.
	Held, HoldTimeouts uint64
	// Refused counts requests refused before any activity: no token, a
	// bad or expired one, another site's.
	Refused uint64
	// Errors counts requests that failed after being accepted.
	Errors uint64
}

// Proxy serves the workspaces. It is an http.Handler for every path under
// /{workspace_id}/.
type Proxy struct {
	opts   Options
	log    *slog.Logger
	client *http.Client
	rp     *httputil.ReverseProxy
	xo     *http.CrossOriginProtection

	routeMu sync.Mutex
	routes  map[string]cachedRoute
	keys    sync.Map // workspace → backend key

	holdMu sync.Mutex
	holds  map[string]*hold

	connMu sync.Mutex
	conns  map[*relay]struct{}
	closed bool

	ctx    context.Context // ends holds and relays at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	requests, websockets, msgsIn, msgsOut, held, holdTimeouts, refused, errs atomic.Uint64
	open                                                                     atomic.Int64
}

type cachedRoute struct {
	addr string
	at   time.Time
}

// New returns a Proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Catalog == nil || opts.Routes == nil || opts.Recorder == nil || opts.Keys == nil {
		return nil, errors.New("proxy: Catalog, Routes, Recorder and Keys are required")
	}
	opts.StartTimeout = cmp.Or(max(opts.StartTimeout, 0), DefaultStartTimeout)
	opts.PollInterval = cmp.Or(max(opts.PollInterval, 0), DefaultPollInterval)
	opts.RouteCacheTTL = cmp.Or(opts.RouteCacheTTL, DefaultRouteCacheTTL)
	opts.MaxMessage = cmp.Or(max(opts.MaxMessage, 0), DefaultMaxMessage)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	if opts.Transport == nil {
		opts.Transport = &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		opts: opts, log: opts.Logger, client: &http.Client{Transport: opts.Transport},
		routes: map[string]cachedRoute{}, holds: map[string]*hold{}, conns: map[*relay]struct{}{},
		ctx: ctx, cancel: cancel,
	}
	p.xo = http.NewCrossOriginProtection()
	for _, o := range opts.OriginPatterns {
		if strings.Contains(o, "://") && !strings.ContainsAny(o, "*?[") {
			if err := p.xo.AddTrustedOrigin(o); err != nil {
				return nil, err
			}
		}
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		ModifyResponse: misdirected,
		Transport:      opts.Transport,
		// Streamed answers (no length, text/event-stream) are flushed as
		// they come; the others when done.
		ErrorHandler: p.backendError,
		ErrorLog:     slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// ServeHTTP serves /{workspace_id}/...: it checks the token, records the
// request as activity, finds the workspace's server (holding the request
// while it starts) and relays.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, _, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !catalog.ValidID(id) {
		page(w, r, http.StatusNotFound, "No such page", "There is no workspace at this address.")
		return
	}
	if !ok { // "/ws-1": the IDE's relative links need the slash
		u := *r.URL
		u.Path += "/"
		u.RawPath = ""
		http.Redirect(w, r, u.String(), http.StatusFound)
		return
	}
	token, fromQuery := credential(r, id)
	exp, err := p.opts.Keys.CheckWorkspace(id, token)
	if err != nil {
		p.refused.Add(1)
		if errors.Is(err, auth.ErrMissing) {
			page(w, r, http.StatusUnauthorized, "Sign-in needed", "Open this workspace with the link its owner was given.")
			return
		}
		page(w, r, http.StatusForbidden, "Not your workspace", "This link is not valid for this workspace, or it has expired. Ask for a new one.")
		return
	}
	upgrade := isWebSocket(r)
	if err := p.checkOrigin(r, upgrade); err != nil {
		p.refused.Add(1)
		page(w, r, http.StatusForbidden, "Refused", "Requests from other sites cannot use this workspace.")
		return
	}
	if fromQuery {
		setTokenCookie(w, r, id, token, exp)
		if r.Method == http.MethodGet && !upgrade {
			// The token leaves the address bar and the history: the
			// cookie carries it from now on.
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
	}

	p.opts.Recorder.Record(id) // the request (or the WebSocket connect) is activity
	p.requests.Add(1)
	t := p.target(r, id)
	if upgrade {
		p.serveWebSocket(w, r, t)
		return
	}
	addr, err := p.route(r.Context(), id)
	if err != nil {
		if addr, err = p.hold(r.Context(), id); err != nil {
			p.holdFailed(w, r, id, err)
			return
		}
	}
	p.forward(w, r, t, addr, true)
}

// credential returns the workspace token of r: a link's ?token=, else the
// workspace's cookie, else an Authorization: Bearer header.
func credential(r *http.Request, id string) (token string, fromQuery bool) {
	if t := r.URL.Query().Get("token"); t != "" {
		return t, true
	}
	for _, c := range r.CookiesNamed(TokenCookie) {
		if c.Value != "" {
			return c.Value, false
		}
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t), false
	}
	return "", false
}

// setTokenCookie keeps the token in a cookie that only this workspace's
// paths receive, that no script reads, and that other sites' requests do
// not carry (except top-level navigations, which change nothing).
func setTokenCookie(w http.ResponseWriter, r *http.Request, id, token string, exp time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: TokenCookie, Value: token, Path: "/" + id + "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	})
}

func isWebSocket(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHas(r.Header, "Connection", "upgrade") && headerHas(r.Header, "Upgrade", "websocket")
}

func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// checkOrigin refuses what a page of another site or origin makes the
// browser send with the workspace's cookie (SameSite=Lax keeps it from
// other sites' subrequests, but not from pages of the same site on another
// port or name), before it counts as activity or wakes anything:
//
//   - a WebSocket upgrade (a GET, but one that opens a terminal, whose
//     answers no CORS rule keeps from the page) whose Origin is neither
//     the proxy's nor in OriginPatterns;
//   - a state-changing request from an origin CrossOriginProtection does
//     not trust;
//   - any other request a browser marks as another site's or origin's
//     (Sec-Fetch-Site, else Origin), reads too: here every request is
//     activity, and wakes a sleeping workspace. Two pass: one whose Origin
//     is in OriginPatterns, and a top-level navigation, a link the user
//     follows to the IDE, which they then see.
//
// Requests without those headers (not from a browser's page) pass: they
// carry no browser's cookie.
func (p *Proxy) checkOrigin(r *http.Request, upgrade bool) error {
	if upgrade {
		// Browsers send an Origin with every upgrade; one that marks the
		// request as another site's and sends none is refused too.
		origin := r.Header.Get("Origin")
		if (origin != "" || webguard.CrossSite(r)) && !p.allowedOrigin(origin, r.Host) {
			return errors.New("proxy: cross-origin WebSocket")
		}
		return nil
	}
	if err := p.xo.Check(r); err != nil {
		return err
	}
	if webguard.CrossSite(r) && !navigation(r) && !p.allowedOrigin(r.Header.Get("Origin"), r.Host) {
		return errors.New("proxy: another site's request")
	}
	return nil
}

// allowedOrigin reports whether a page of origin may use the workspaces:
// the proxy's own (host is the request's Host), or one in OriginPatterns.
func (p *Proxy) allowedOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, pat := range p.opts.OriginPatterns {
		target := u.Host
		if strings.Contains(pat, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := pathMatch(strings.ToLower(pat), strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}

// navigation reports whether r is a browser tab's top-level navigation to
// a page (a link followed, an address typed): not a frame, an image, a
// script or a fetch of another page, and never a write.
func navigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// target is what a request becomes for the workspace's server: the path
// without /{id}, the query without the token, the cookies without the
// workspace's, and the workspace's backend key.
type target struct {
	id                      string
	path, rawPath, rawQuery string
	cookie                  string
	key                     string
}

func (p *Proxy) target(r *http.Request, id string) target {
	t := target{id: id, path: strings.TrimPrefix(r.URL.Path, "/"+id), rawQuery: r.URL.RawQuery, key: p.backendKey(id)}
	if rp := r.URL.RawPath; rp != "" {
		t.rawPath = strings.TrimPrefix(rp, "/"+id)
	}
	if strings.Contains(t.rawQuery, "token=") {
		q := r.URL.Query()
		q.Del("token")
		t.rawQuery = q.Encode()
	}
	if r.Header.Get("Cookie") != "" {
		var keep []string
		for _, c := range r.Cookies() {
			if c.Name != TokenCookie {
				keep = append(keep, c.String())
			}
		}
		t.cookie = strings.Join(keep, "; ")
	}
	return t
}

// header makes h, a copy of the browser's headers, fit for the workspace's
// server: no token, the workspace's key.
func (t target) header(h http.Header) {
	h.Del("Authorization")
	h.Del("Cookie")
	if t.cookie != "" {
		h.Set("Cookie", t.cookie)
	}
	h.Set(workspace.KeyHeader, t.key)
	h.Set("X-Forwarded-Prefix", "/"+t.id)
}

// backendKey returns workspace id's backend key, computed once.
func (p *Proxy) backendKey(id string) string {
	if k, ok := p.keys.Load(id); ok {
		return k.(string)
	}
	k := p.opts.Keys.BackendKey(id)
	p.keys.Store(id, k)
	return k
}

// route returns the workspace's server address, from the cache when it
// is fresh.
func (p *Proxy) route(ctx context.Context, id string) (string, error) {
	if p.opts.RouteCacheTTL > 0 {
		p.routeMu.Lock()
		c, ok := p.routes[id]
		p.routeMu.Unlock()
		if ok && time.Since(c.at) < p.opts.RouteCacheTTL {
			return c.addr, nil
		}
	}
	addr, err := p.opts.Routes.Route(ctx, id)
	if err != nil {
		p.forget(id)
		return "", err
	}
	if p.opts.RouteCacheTTL > 0 {
		p.routeMu.Lock()
		if len(p.routes) > 100000 {
			clear(p.routes) // bounded; refilled on demand
		}
		p.routes[id] = cachedRoute{addr: addr, at: time.Now()}
		p.routeMu.Unlock()
	}
	return addr, nil
}

func (p *Proxy) forget(id string) {
	p.routeMu.Lock()
	delete(p.routes, id)
	p.routeMu.Unlock()
}

type forwardKey struct{}

// forwardState travels with a request through the ReverseProxy: where it
// goes, and, for its ErrorHandler, whether a request whose workspace
// stopped under it may be retried.
type forwardState struct {
	target
	addr     string
	retry    bool
	original *http.Request
}

// forward relays r to the workspace's server at addr. If the server is
// gone (connection refused: it was stopped after the route was read), an
// idempotent request without a body is held until the workspace runs
// again and retried once.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t target, addr string, retry bool) {
	st := &forwardState{target: t, addr: addr, original: r,
		retry: retry && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.ContentLength == 0}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardKey{}, st)))
}

// rewrite is the ReverseProxy's Rewrite: the request as the workspace's
// server gets it (pr.Out is already a copy of the browser's).
func rewrite(pr *httputil.ProxyRequest) {
	st := pr.In.Context().Value(forwardKey{}).(*forwardState)
	pr.Out.URL = &url.URL{Scheme: "http", Host: st.addr, Path: st.path, RawPath: st.rawPath, RawQuery: st.rawQuery}
	pr.Out.Host = ""
	st.header(pr.Out.Header)
	pr.SetXForwarded()
}

func (p *Proxy) backendError(w http.ResponseWriter, r *http.Request, err error) {
	st, _ := r.Context().Value(forwardKey{}).(*forwardState)
	if st == nil {
		p.errs.Add(1)
		page(w, r, http.StatusBadGateway, "Workspace unreachable", "The workspace did not answer.")
		return
	}
	if r.Context().Err() != nil {
		return // the client left
	}
	if isRefused(err) {
		p.forget(st.id)
		if st.retry {
			addr, herr := p.hold(r.Context(), st.id)
			if herr != nil {
				p.holdFailed(w, r, st.id, herr)
				return
			}
			p.forward(w, st.original, st.target, addr, false)
			return
		}
		// Not safe to send twice: ask for the workspace to run and let
		// the user retry.
		go func() { _, _ = p.opts.Catalog.AskRun(context.WithoutCancel(r.Context()), st.id) }()
		w.Header().Set("Retry-After", "2")
		page(w, r, http.StatusServiceUnavailable, "Workspace restarting", "The workspace stopped during this request and is starting again. Send it once more in a moment.")
		return
	}
	p.errs.Add(1)
	p.log.Warn("proxy: workspace server failed", "workspace", st.id, "err", err)
	page(w, r, http.StatusBadGateway, "Workspace unreachable", "The workspace did not answer this request.")
}

// errMisdirected is a request that reached another workspace's server: the
// route was read before its server stopped and another took its port.
var errMisdirected = errors.New("proxy: another workspace's server answered")

// misdirected is the ReverseProxy's ModifyResponse: a 421 from the
// workspace's server is a stale route, handled as a server that is gone.
func misdirected(res *http.Response) error {
	if res.StatusCode == http.StatusMisdirectedRequest {
		return errMisdirected
	}
	return nil
}

// isRefused reports whether err means the workspace's server is not at the
// address any more: nothing listens there, or another workspace's server
// does.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, errMisdirected)
}

// Stats returns a snapshot of the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Requests: p.requests.Load(), WebSockets: p.websockets.Load(), Open: p.open.Load(),
		MessagesIn: p.msgsIn.Load(), MessagesOut: p.msgsOut.Load(),
		Held: p.held.Load(), HoldTimeouts: p.holdTimeouts.Load(), Refused: p.refused.Load(), Errors: p.errs.Load(),
	}
}

// Close ends the held requests and the WebSocket relays (StatusGoingAway)
// and waits for them: the part of a shutdown http.Server.Shutdown does not
// do, as it neither waits for hijacked connections nor ends them.
func (p *Proxy) Close() {
	p.connMu.Lock()
	p.closed = true
	conns := make([]*relay, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.connMu.Unlock()
	p.holdMu.Lock() // hold checks p.ctx and adds to p.wg under it
	p.cancel()
	p.holdMu.Unlock()
	for _, c := range conns {
		c.goingAway()
	}
	p.wg.Wait()
}
