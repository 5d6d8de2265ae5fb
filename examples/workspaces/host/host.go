//go:build linux

// Package host runs workspaces on this machine: each workspace is a
// directory of files and, while it runs, a server process of its own
// (pool/process) on a loopback port. Everything lives under one data
// directory, which every controller and proxy of a deployment share:
//
//	files/<id>/          the workspace's files, while RUNNING or STANDBY
//	archives/<id>.tar.gz the files of an ARCHIVED workspace
//	run/<id>.json        the route to the running server (its address and process)
//
// A controller starts and stops the servers, packs and unpacks the files;
// a proxy reads run/<id>.json to find where a workspace answers.
//
// Each workspace's server comes from a pool of at most one (package pool,
// on a pool/process provisioner): Start acquires it and detaches it, since a
// server outlives the controller that started it, and the route owns it
// from then on (Stop destroys it through the provisioner, as a detached
// item's owner does). A server no route leads to — left by a start or a stop
// whose controller was killed between the process and the route — is an
// orphan, which the pool's Reconcile destroys; any controller with the
// same data directory finds it (pool/process lists servers by label).
package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/process"
)

// ErrNoRoute is returned by Route for a workspace whose server is not
// running.
var ErrNoRoute = errors.New("host: workspace not running")

// Options configure a Host.
type Options struct {
	// Dir is the data directory. Required; created if missing.
	Dir string
	// Command starts a workspace's server. In each argument "{id}",
	// "{dir}" (its files) and "{addr}" (host:port to listen on) are
	// replaced. Required.
	Command []string
	// Env is added to the server's environment, with the same
	// replacements; a "NAME=" entry removes NAME inherited from this
	// process (keep secrets out of workspaces).
	Env []string
	// Key returns the environment entries that are the workspace's own
	// secrets (its backend key), added after Env. Nil adds none.
	Key func(id string) []string
	// StopGrace is how long a server has to exit after SIGTERM. 0 means 5 s.
	StopGrace time.Duration
	// StartTimeout bounds a server's start-up. 0 means 20 s.
	StartTimeout time.Duration
	// Output receives the servers' output; nil discards it.
	Output io.Writer
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
}

// Host starts, stops, archives and restores workspaces in a data
// directory. It is safe for concurrent use, as long as no two callers
// operate on one workspace at once (the controller's operation column
// sees to that).
type Host struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	pools map[string]*servers // by workspace, while this Host operates on it
}

// servers is one workspace's pool of at most one server, and its
// provisioner, which also checks a server a route leads to.
type servers struct {
	prov *process.Provisioner
	pool *pool.Pool[process.Worker]
}

// Route is the content of run/<id>.json.
type Route struct {
	// ID is the workspace.
	ID string `json:"id"`
	// Addr is where its server listens.
	Addr string `json:"addr"`
	// Worker is its process, for a controller that stops it.
	Worker process.Worker `json:"worker"`
}

// New returns a Host on opts.Dir, creating its directories.
func New(opts Options) (*Host, error) {
	if opts.Dir == "" || len(opts.Command) == 0 {
		return nil, errors.New("host: Dir and Command are required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	opts.Dir = dir // the processes' label derives from it
	if opts.StopGrace == 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 20 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{"files", "archives", "run"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
	}
	return &Host{opts: opts, log: opts.Logger, pools: map[string]*servers{}}, nil
}

// FilesDir returns the directory of workspace id's files.
func (h *Host) FilesDir(id string) string { return filepath.Join(h.opts.Dir, "files", id) }

// ArchivePath returns the archive of workspace id's files.
func (h *Host) ArchivePath(id string) string {
	return filepath.Join(h.opts.Dir, "archives", id+".tar.gz")
}

func (h *Host) routePath(id string) string { return filepath.Join(h.opts.Dir, "run", id+".json") }

// label names the processes of workspace id in this host's directory, so
// that List and Destroy of pool/process find exactly them (and not those
// of a workspace of the same name under another directory).
func (h *Host) label(id string) string {
	sum := sha256.Sum256([]byte(h.opts.Dir))
	return "workspace-" + id + "-" + hex.EncodeToString(sum[:6])
}

// servers returns workspace id's pool, made on first use.
func (h *Host) servers(id string) (*servers, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.pools[id]; s != nil {
		return s, nil
	}
	env := append([]string(nil), h.opts.Env...)
	if h.opts.Key != nil {
		env = append(env, h.opts.Key(id)...)
	}
	// "{addr}" is left for pool/process, which picks the port.
	repl := strings.NewReplacer("{id}", id, "{dir}", h.FilesDir(id))
	cmd := make([]string, len(h.opts.Command))
	for i, a := range h.opts.Command {
		cmd[i] = repl.Replace(a)
	}
	for i, e := range env {
		env[i] = repl.Replace(e)
	}
	prov, err := process.New(process.Options{
		Command:      cmd,
		Env:          env,
		Label:        h.label(id),
		StopGrace:    h.opts.StopGrace,
		ReadyOptions: probe.Options{Timeout: h.opts.StartTimeout},
		Stdout:       h.opts.Output,
		Stderr:       h.opts.Output,
		Logger:       h.log,
	})
	if err != nil {
		return nil, err
	}
	p, err := pool.New(prov, pool.Options{
		// One server, made when asked for and kept by its route: no
		// warm item, no expiry, no janitor.
		MaxSize:             1,
		IdleTimeout:         -1,
		MaxLifetime:         -1,
		HealthCheckInterval: -1,
		JanitorInterval:     -1,
		// The controller runs one operation on a workspace at a time:
		// a server no route leads to is nobody's at once.
		OrphanGracePeriod: -1,
		CreateTimeout:     h.opts.StartTimeout + h.opts.StopGrace,
		DestroyTimeout:    h.opts.StopGrace + 10*time.Second,
		Owned: func(_ context.Context, ids []string) ([]string, error) {
			r, err := h.readRoute(id)
			if err != nil {
				return nil, nil
			}
			routed := prov.ID(r.Worker)
			for _, listed := range ids {
				if listed == routed {
					return []string{routed}, nil
				}
			}
			return nil, nil
		},
		Logger: h.log,
	})
	if err != nil {
		return nil, err
	}
	s := &servers{prov: prov, pool: p}
	h.pools[id] = s
	return s, nil
}

// Route returns where workspace id's server listens, or ErrNoRoute.
func (h *Host) Route(_ context.Context, id string) (string, error) {
	r, err := h.readRoute(id)
	if err != nil {
		return "", err
	}
	return r.Addr, nil
}

func (h *Host) readRoute(id string) (Route, error) {
	b, err := os.ReadFile(h.routePath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Route{}, ErrNoRoute
	}
	if err != nil {
		return Route{}, fmt.Errorf("host: route of %s: %w", id, err)
	}
	var r Route
	if err := json.Unmarshal(b, &r); err != nil || r.ID != id || r.Addr == "" {
		return Route{}, fmt.Errorf("host: route of %s is corrupt", id)
	}
	return r, nil
}

// Start starts workspace id's server on its files, creating the directory
// if the workspace has none (a new workspace), and writes its route. A
// server already running is left as it is.
func (h *Host) Start(ctx context.Context, id string) error {
	if r, err := h.readRoute(id); err == nil {
		s, serr := h.servers(id)
		if serr == nil && s.prov.Check(ctx, r.Worker) == nil {
			return nil
		}
		_ = h.Stop(ctx, id) // a stale route, a dead server
	}
	if err := os.MkdirAll(h.FilesDir(id), 0o700); err != nil {
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	s, err := h.servers(id)
	if err != nil {
		return err
	}
	if _, err := s.pool.Reconcile(ctx); err != nil {
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	hd, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	w := hd.Value()
	b, _ := json.Marshal(Route{ID: id, Addr: w.Addr, Worker: w})
	if err := writeFileAtomic(h.routePath(id), b); err != nil {
		hd.Destroy(pool.ReasonUnhealthy)
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	hd.Detach() // the route owns it now
	h.log.Debug("workspace server started", "workspace", id, "addr", w.Addr, "pid", w.PID)
	return nil
}

// Stop stops workspace id's server and removes its route; its files stay.
// A workspace that is not running is success. Without a route it stops
// the servers no route leads to, which a start or a stop cut short may
// have left.
func (h *Host) Stop(ctx context.Context, id string) error {
	r, rerr := h.readRoute(id)
	// The route goes first: a proxy that reads it now finds none and asks
	// for the workspace to run, rather than reaching a dying server.
	if err := os.Remove(h.routePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("host: stop %s: %w", id, err)
	}
	s, err := h.servers(id)
	if err != nil {
		return err
	}
	if rerr == nil {
		// The route owned the server since Start detached it: it is
		// destroyed as the pool would, without listing every process.
		if err := s.prov.Destroy(ctx, r.Worker); err != nil {
			return fmt.Errorf("host: stop %s: %w", id, err)
		}
		h.log.Debug("workspace server stopped", "workspace", id, "pid", r.Worker.PID)
	} else {
		res, err := s.pool.Reconcile(ctx)
		if err != nil {
			return fmt.Errorf("host: stop %s: %w", id, err)
		}
		if res.Orphans > 0 {
			h.log.Warn("host: stopped workspace servers no route led to", "workspace", id, "servers", res.Orphans)
		}
	}
	h.mu.Lock()
	delete(h.pools, id)
	h.mu.Unlock()
	if err := s.pool.Close(ctx); err != nil {
		return fmt.Errorf("host: stop %s: %w", id, err)
	}
	return nil
}

// Alive reports whether workspace id's server runs and answers.
func (h *Host) Alive(ctx context.Context, id string) bool {
	r, err := h.readRoute(id)
	if err != nil {
		return false
	}
	s, err := h.servers(id)
	return err == nil && s.prov.Check(ctx, r.Worker) == nil
}

// StopAll stops every workspace server that has a route: for a test's
// cleanup, or an operator taking a host down.
func (h *Host) StopAll(ctx context.Context) error {
	ents, err := os.ReadDir(filepath.Join(h.opts.Dir, "run"))
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			errs = append(errs, h.Stop(ctx, id))
		}
	}
	return errors.Join(errs...)
}

// writeFileAtomic writes b to path through a temporary file and a rename,
// so that a reader sees the old content or the new, never a part.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
