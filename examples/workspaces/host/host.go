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
// a proxy reads run/<id>.json to find where a workspace answers. A server
// outlives the controller that started it: any controller with the same
// data directory can stop it (pool/process finds it by its label).
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
	provs map[string]*process.Provisioner // servers this Host started, by workspace
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
	return &Host{opts: opts, log: opts.Logger, provs: map[string]*process.Provisioner{}}, nil
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

func (h *Host) provisioner(id string) (*process.Provisioner, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.provs[id]; p != nil {
		return p, nil
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
	p, err := process.New(process.Options{
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
	h.provs[id] = p
	return p, nil
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
		p, perr := h.provisioner(id)
		if perr == nil && p.Check(ctx, r.Worker) == nil {
			return nil
		}
		_ = h.Stop(ctx, id) // a stale route, a dead server
	}
	if err := os.MkdirAll(h.FilesDir(id), 0o700); err != nil {
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	p, err := h.provisioner(id)
	if err != nil {
		return err
	}
	if err := h.reap(ctx, p, id); err != nil {
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	w, err := p.Create(ctx)
	if err != nil {
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	b, _ := json.Marshal(Route{ID: id, Addr: w.Addr, Worker: w})
	if err := writeFileAtomic(h.routePath(id), b); err != nil {
		_ = p.Destroy(context.WithoutCancel(ctx), w)
		return fmt.Errorf("host: start %s: %w", id, err)
	}
	h.log.Debug("workspace server started", "workspace", id, "addr", w.Addr, "pid", w.PID)
	return nil
}

// Stop stops workspace id's server and removes its route; its files stay.
// A workspace that is not running is success.
func (h *Host) Stop(ctx context.Context, id string) error {
	r, err := h.readRoute(id)
	if errors.Is(err, ErrNoRoute) {
		// A stop or start cut short (its controller killed) may have
		// left a server that no route leads to.
		p, perr := h.provisioner(id)
		if perr != nil {
			return perr
		}
		return h.reap(ctx, p, id)
	}
	// The route goes first: a proxy that reads it now finds none and asks
	// for the workspace to run, rather than reaching a dying server.
	if rerr := os.Remove(h.routePath(id)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("host: stop %s: %w", id, rerr)
	}
	if err != nil {
		return nil // a corrupt route: nothing to stop by it
	}
	p, err := h.provisioner(id)
	if err != nil {
		return err
	}
	if err := p.Destroy(ctx, r.Worker); err != nil {
		return fmt.Errorf("host: stop %s: %w", id, err)
	}
	h.mu.Lock()
	delete(h.provs, id)
	h.mu.Unlock()
	h.log.Debug("workspace server stopped", "workspace", id, "pid", r.Worker.PID)
	return nil
}

// reap stops the servers of workspace id that no route leads to: left by
// a start or a stop whose controller was killed between the process and
// the route.
func (h *Host) reap(ctx context.Context, p *process.Provisioner, id string) error {
	ws, err := p.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range ws {
		h.log.Warn("host: stopping a workspace server no route leads to", "workspace", id, "pid", w.Value.PID)
		errs = append(errs, p.Destroy(ctx, w.Value))
	}
	return errors.Join(errs...)
}

// Alive reports whether workspace id's server runs and answers.
func (h *Host) Alive(ctx context.Context, id string) bool {
	r, err := h.readRoute(id)
	if err != nil {
		return false
	}
	p, err := h.provisioner(id)
	return err == nil && p.Check(ctx, r.Worker) == nil
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
