package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/examples/entities/pgnotify"
	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/examples/workspaces/admin"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/controller"
	"github.com/ttlkit/ttlkit/examples/workspaces/host"
	"github.com/ttlkit/ttlkit/examples/workspaces/proxy"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// Deps are the parts a test replaces.
type Deps struct {
	// Runtime and Routes stand in for the workspace host: workspaces that
	// are not processes. Both or neither.
	Runtime controller.Runtime
	Routes  proxy.Routes
	// WorkspaceCommand starts a workspace's server ({id}, {dir} and
	// {addr} are replaced); nil means this program's own "workspace"
	// subcommand.
	WorkspaceCommand []string
	// Wake, if set, wraps the runner's Wake: it gets the decisions and
	// the Wake it replaces.
	Wake func(ctx context.Context, exps []ttl.Expiry, next func(context.Context, []ttl.Expiry) error) error
	// Sink, if set, wraps the trackers' sink (a test cuts a proxy off).
	Sink func(ttl.Sink) ttl.Sink
}

// System is one process of the system: the components cfg.Component names,
// with their HTTP server. Shutdown stops it.
type System struct {
	cfg  Config
	log  *slog.Logger
	keys *auth.Keys

	pool     *pgxpool.Pool
	rdb      *redis.Client
	store    entities.Store
	buffer   ttl.Buffer // nil: trackers write to the store
	notifier *pgnotify.Notifier
	catalog  *catalog.Catalog
	host     *host.Host
	tempDir  string // removed at shutdown (memory mode)

	tracker    *ttl.Tracker
	proxy      *proxy.Proxy
	runner     *ttl.Runner
	controller *controller.Controller
	claims     *lease.Manager // the controllers' claims on operations (PostgreSQL)
	listener   *pgnotify.Listener

	registry *prometheus.Registry
	server   *http.Server
	ln       net.Listener
	served   chan error
}

func (s *System) has(component string) bool {
	return s.cfg.Component == "all" || s.cfg.Component == component
}

// Addr returns the address the HTTP server listens on.
func (s *System) Addr() string { return s.ln.Addr().String() }

// Start builds the components of cfg.Component on their backends and
// serves. On error, whatever it started is stopped.
func Start(ctx context.Context, cfg Config, deps Deps, log *slog.Logger) (s *System, err error) {
	s = &System{cfg: cfg, log: log, registry: prometheus.NewRegistry(), served: make(chan error, 1)}
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = s.Shutdown(sctx)
		}
	}()
	if s.keys, err = auth.New(cfg.Secret, cfg.AdminToken, nil); err != nil {
		return nil, err
	}
	if err = s.openBackends(ctx); err != nil {
		return nil, err
	}
	if (s.has("proxy") || s.has("controller")) && (deps.Runtime == nil || deps.Routes == nil) {
		if err = s.openHost(deps.WorkspaceCommand); err != nil {
			return nil, err
		}
	}
	var wakeIDs catalog.Waker
	if s.notifier != nil {
		wakeIDs = s.notifier.Wake
	}
	if s.has("controller") {
		var rt controller.Runtime = s.host
		if deps.Runtime != nil {
			rt = deps.Runtime
		}
		if err = s.openClaims(ctx); err != nil {
			return nil, err
		}
		s.controller, err = controller.New(s.store, rt, controller.Options{
			Standby: cfg.Standby, Interval: cfg.ReconcileInterval, Logger: log,
			Claims: s.claims, ClaimGrace: cfg.ClaimGrace, Name: instanceName(),
		})
		if err != nil {
			return nil, err
		}
		if s.pool != nil {
			s.listener, err = pgnotify.ListenExpired(ctx, s.pool, cfg.Channel, func(exps []ttl.Expiry) {
				_ = s.controller.Wake(context.Background(), exps)
			}, pgnotify.ListenOptions{OnError: func(err error) { log.Warn("controller: wake channel failed; reconnecting", "err", err) }})
			if err != nil {
				return nil, err
			}
		} else {
			wakeIDs = s.controller.WakeIDs
		}
	}
	s.catalog = catalog.New(s.store, wakeIDs)
	if s.has("runner") {
		if err = s.startRunner(deps); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	if s.has("proxy") {
		var routes proxy.Routes = s.host
		if deps.Routes != nil {
			routes = deps.Routes
		}
		if err = s.startProxy(mux, routes, deps); err != nil {
			return nil, err
		}
	}
	if err = s.registerMetrics(); err != nil {
		return nil, err
	}
	mux.Handle("GET /metrics", s.guard(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}), false))
	mux.Handle("GET /healthz", s.guard(http.HandlerFunc(s.healthz), false))
	// Every request, whatever its route, is first checked for its Host;
	// which other sites may send what is each route's own decision.
	return s, s.serve(s.guard(mux, true))
}

// guard puts h behind webguard with ALLOWED_HOSTS: a request for any other
// Host than those, a loopback name or an IP address (a page under a
// DNS-rebinding name) is refused before h runs. Unless anySite, so is any
// request a browser marks as sent by another site's page, reads included,
// except a top-level navigation to a page (a link followed): nothing but
// the workspaces (with ALLOWED_ORIGINS) is for other sites to use, and
// even a read of the admin API or of /metrics is not theirs to make.
func (s *System) guard(h http.Handler, anySite bool) http.Handler {
	return webguard.Handler(h, webguard.Options{Hosts: s.cfg.AllowedHosts, AnySite: anySite, Pages: true, Deny: proxy.Refuse})
}

// openBackends connects the table and the buffer: PostgreSQL and Redis,
// or memory.
func (s *System) openBackends(ctx context.Context) error {
	cfg := s.cfg
	if cfg.PostgresURL == "" {
		s.store = entities.NewMemoryStore(entities.MemoryStoreOptions{})
		s.buffer = new(ttl.MemoryBuffer)
		return nil
	}
	pool, err := pgxpool.New(ctx, cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	s.pool = pool
	store, err := pgentities.New(pool, pgttl.Options{Table: cfg.Table, LastActivityColumn: "last_access_at", NoOperation: "NONE"})
	if err != nil {
		return fmt.Errorf("WORKSPACES_TABLE: %w", err)
	}
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	s.store = store
	if s.notifier, err = pgnotify.NewNotifier(pool, cfg.Channel); err != nil {
		return fmt.Errorf("WAKE_CHANNEL: %w", err)
	}
	if cfg.RedisURL != "" {
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
		s.rdb = redis.NewClient(opts)
		if s.buffer, err = redisttl.New(s.rdb, redisttl.Options{Key: cfg.RedisKey}); err != nil {
			return fmt.Errorf("ACTIVITY_KEY: %w", err)
		}
	}
	return nil
}

// openClaims opens the lease store where the controllers sharing the
// table claim their operations: a table beside it ("<table>_claims"), so
// that a controller that dies mid-operation leaves a claim that lapses,
// and another takes the operation over. In memory, the controller makes
// its own.
func (s *System) openClaims(ctx context.Context) error {
	if s.pool == nil {
		return nil
	}
	st, err := sqllease.NewPostgres(s.pool, sqllease.Options{Table: s.cfg.Table + "_claims"})
	if err != nil {
		return fmt.Errorf("WORKSPACES_TABLE: %w", err)
	}
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	s.claims, err = lease.New(controller.ClaimBudget, lease.Options{Store: st, Logger: s.log})
	return err
}

// instanceName names this process in its claims: host and pid.
func instanceName() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}

// openHost opens the workspace host in the data directory.
func (s *System) openHost(command []string) error {
	dir := s.cfg.DataDir
	if dir == "" {
		if s.pool != nil {
			return errors.New("WORKSPACES_DIR must be set with DATABASE_URL: the workspaces outlive this process")
		}
		d, err := os.MkdirTemp("", "ttlkit-workspaces-")
		if err != nil {
			return err
		}
		dir, s.tempDir = d, d
	}
	if command == nil {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		command = []string{exe, "workspace", "-id", "{id}", "-dir", "{dir}", "-addr", "{addr}"}
	}
	h, err := host.New(host.Options{
		Dir:     dir,
		Command: command,
		// Nothing of this process's secrets reaches a workspace: they
		// would let its user open every other one.
		Env:    []string{"WORKSPACES_SECRET=", "ADMIN_TOKEN=", "DATABASE_URL=", "REDIS_URL="},
		Key:    func(id string) []string { return []string{envWorkspaceKey + "=" + s.keys.BackendKey(id)} },
		Output: os.Stderr,
		Logger: s.log,
	})
	if err != nil {
		return fmt.Errorf("WORKSPACES_DIR: %w", err)
	}
	s.host = h
	return nil
}

func (s *System) startRunner(deps Deps) error {
	wake := func(ctx context.Context, exps []ttl.Expiry) error { return s.controller.Wake(ctx, exps) }
	if s.notifier != nil {
		wake = s.notifier.WakeExpired
	}
	if deps.Wake != nil {
		next := wake
		wake = func(ctx context.Context, exps []ttl.Expiry) error { return deps.Wake(ctx, exps, next) }
	}
	notify := wake
	wake = func(ctx context.Context, exps []ttl.Expiry) error {
		for _, x := range exps {
			s.log.Info("runner: TTL expired", "workspace", x.ID, "rule", x.Rule, "desired_state", x.Then, "last_access_at", x.LastActivityAt)
		}
		return notify(ctx, exps)
	}
	var err error
	s.runner, err = ttl.NewRunner(s.store, Rules(s.cfg.Standby, s.cfg.Archive), ttl.RunnerOptions{
		Interval: s.cfg.TickInterval,
		Buffer:   s.buffer,
		Hold:     s.cfg.FlushInterval + s.cfg.TickInterval,
		Wake:     wake,
		Logger:   s.log,
	})
	return err
}

func (s *System) startProxy(mux *http.ServeMux, routes proxy.Routes, deps Deps) error {
	var sink ttl.Sink = s.store
	if s.buffer != nil {
		sink = s.buffer
	}
	if deps.Sink != nil {
		sink = deps.Sink(sink)
	}
	var err error
	s.tracker, err = ttl.NewTracker(sink, ttl.TrackerOptions{
		FlushInterval: s.cfg.FlushInterval,
		// Long enough to send again what a restarted Redis lost, with a
		// margin for the outage itself, and at least the default 5 minutes.
		Retain: max(5*time.Minute, 2*s.cfg.FlushInterval+s.cfg.TickInterval+time.Minute),
		// Recorded times are rounded up by at most this: a tenth of a
		// flush, so short test TTLs keep their precision, and at most the
		// default second.
		Resolution: min(time.Second, s.cfg.FlushInterval/10),
		Logger:     s.log,
	})
	if err != nil {
		return err
	}
	s.proxy, err = proxy.New(proxy.Options{
		Catalog: s.catalog, Routes: routes, Recorder: s.tracker, Keys: s.keys,
		StartTimeout: s.cfg.StartTimeout, OriginPatterns: s.cfg.AllowedOrigins, Logger: s.log,
	})
	if err != nil {
		return err
	}
	adm, err := admin.New(admin.Options{Catalog: s.catalog, Keys: s.keys, Standby: s.cfg.Standby, Archive: s.cfg.Archive,
		TokenTTL: s.cfg.TokenTTL, Logger: s.log})
	if err != nil {
		return err
	}
	// The admin page and API are for this origin's page alone: other
	// sites' requests are refused whatever their method, but for a link
	// followed to the page (the API's writes check again). The workspaces
	// decide per request, as ALLOWED_ORIGINS lets named other origins in
	// (the proxy's checkOrigin).
	mux.Handle("/admin/", s.guard(adm, false))
	mux.Handle("GET /{$}", s.guard(http.RedirectHandler("/admin/", http.StatusFound), false))
	mux.Handle("/", s.proxy)
	return nil
}

// serve starts the HTTP server.
func (s *System) serve(h http.Handler) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("LISTEN_ADDR: %w", err)
	}
	s.ln = ln
	s.server = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.proxy != nil {
		s.server.RegisterOnShutdown(s.proxy.Close)
	}
	go func() { s.served <- s.server.Serve(ln) }()
	return nil
}

// healthz answers 200 when the table (and the buffer) answer within 2 s.
func (s *System) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	var err error
	if s.pool != nil {
		err = s.pool.Ping(ctx)
	}
	if err == nil && s.rdb != nil {
		err = s.rdb.Ping(ctx).Err()
	}
	if err != nil {
		http.Error(w, "backend unavailable", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// Shutdown stops the system in order: the HTTP server (new requests
// refused, requests in flight finished, held requests and WebSocket relays
// ended), the tracker (its last flush), the runner, the controller (its
// operations in progress finish). Workspace servers keep running for the
// next controller, except in memory mode, where nothing could find them
// again: they are stopped and the temporary data directory removed.
func (s *System) Shutdown(ctx context.Context) error {
	var errs []error
	if s.server != nil {
		errs = append(errs, s.server.Shutdown(ctx))
		if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	if s.tracker != nil {
		if err := s.tracker.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("final activity flush: %w", err))
		}
	}
	if s.runner != nil {
		errs = append(errs, s.runner.Close(ctx))
	}
	if s.listener != nil {
		errs = append(errs, s.listener.Close(ctx))
	}
	if s.controller != nil {
		errs = append(errs, s.controller.Close(ctx))
	}
	if s.claims != nil {
		errs = append(errs, s.claims.Close(ctx))
	}
	if s.host != nil && s.pool == nil {
		errs = append(errs, s.host.StopAll(ctx))
	}
	if s.tempDir != "" {
		errs = append(errs, os.RemoveAll(s.tempDir))
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.pool != nil {
		s.pool.Close()
	}
	return errors.Join(errs...)
}

// Rules are the design's two TTLs as ttl rules: a RUNNING workspace idle
// (by last_access_at) for longer than standby is to go to STANDBY, and one
// in STANDBY (by phase_changed_at) for longer than archive to ARCHIVED.
func Rules(standby, archive time.Duration) []ttl.Rule {
	return []ttl.Rule{
		{Name: "standby", Phase: catalog.Running, Since: ttl.SinceLastActivity, After: standby, Then: catalog.Standby},
		{Name: "archive", Phase: catalog.Standby, Since: ttl.SincePhaseChanged, After: archive, Then: catalog.Archived},
	}
}
