//go:build linux

// Package process is a pool.Provisioner of worker processes: each item is a
// local server process started from a command template with a port of its
// own, in its own process group, ready when a probe says so, stopped
// gracefully (a signal, a grace period, then SIGKILL to the whole group) and
// reaped.
//
// Every worker carries a label in its environment (EnvLabel), so List finds
// the workers that really exist by scanning /proc — including those an
// earlier, crashed owner started — and a pool's start-up cleanup and
// reconciliation can destroy them. A worker that exits is unhealthy at once:
// Check reports the exit without waiting for a probe, and Watch tells a pool
// as it happens, so the pool destroys a worker that died while idle before
// anyone gets it.
//
// The package is for Linux (it reads /proc).
package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/probe"
)

// EnvLabel is the environment variable every worker is started with; its
// value is "<label>:<id>:<port>". List finds workers by it.
const EnvLabel = "TTLKIT_WORKER"

// Defaults of the Options fields left zero.
const (
	defaultHost       = "127.0.0.1"
	defaultStopGrace  = 10 * time.Second
	defaultStopSignal = syscall.SIGTERM
)

var (
	// ErrInvalid matches every error about bad options or arguments.
	ErrInvalid = errors.New("process: invalid argument")
	// ErrExited matches the error Check and Create return for a worker
	// whose process has exited.
	ErrExited = errors.New("process: worker exited")
)

// Worker is one worker process. Its exported fields describe it completely,
// so a shared pool inventory can hand it to another process as JSON.
type Worker struct {
	// ID is the worker's identity, unique per Provisioner label.
	ID string `json:"id"`
	// PID is the worker's process id; it leads its own process group.
	PID int `json:"pid"`
	// Port is the port chosen for it, and Addr host:port.
	Port int    `json:"port"`
	Addr string `json:"addr"`
	// Created is when it was started.
	Created time.Time `json:"created"`
}

// Options configures a Provisioner. Command and Label are required.
type Options struct {
	// Command is the program and its arguments. In each, "{port}", "{addr}"
	// and "{id}" are replaced by the worker's port, host:port and id.
	Command []string
	// Env is added to the provisioner's own environment, with the same
	// replacements ("PORT={port}").
	Env []string
	// Dir is the working directory; "" means the provisioner's.
	Dir string
	// Label names the workers of this provisioner: List reports only
	// workers with this label. Letters, digits, '.', '_' and '-'.
	Label string
	// Host is the address workers listen on. Empty means 127.0.0.1.
	Host string
	// Ready returns the probe that tells when w is ready to serve; nil
	// means a TCP connect to w.Addr. Check runs it once too.
	Ready func(w Worker) probe.Func
	// ReadyOptions bounds the wait for readiness in Create (its Timeout)
	// and one health probe in Check (its AttemptTimeout).
	ReadyOptions probe.Options
	// StopSignal asks a worker to stop. Zero means SIGTERM.
	StopSignal syscall.Signal
	// StopGrace is how long Destroy waits after StopSignal before it sends
	// SIGKILL to the worker's process group. Zero means 10 seconds.
	StopGrace time.Duration
	// Stdout and Stderr receive the workers' output; nil discards it.
	Stdout, Stderr io.Writer
	// Logger, when set, logs starts and stops at Debug and kills at Warn.
	Logger *slog.Logger
}

// Provisioner starts and stops worker processes. It implements
// pool.Provisioner, pool.Checker, pool.Lister and pool.Watcher for Worker.
// It is safe for concurrent use.
//
// For each worker it started, a Provisioner keeps one goroutine that waits
// for the process to exit and reaps it; Destroy ends it by stopping the
// worker, so a pool that destroys its items leaves none behind. Watching a
// worker it did not start takes one goroutine until the watch ends.
type Provisioner struct {
	opts  Options
	ready func(Worker) probe.Func

	mu       sync.Mutex
	children map[int]*child
}

var (
	_ pool.Provisioner[Worker] = (*Provisioner)(nil)
	_ pool.Checker[Worker]     = (*Provisioner)(nil)
	_ pool.Lister[Worker]      = (*Provisioner)(nil)
	_ pool.Watcher[Worker]     = (*Provisioner)(nil)
)

// child is a worker this Provisioner started: its exit is known at once.
type child struct {
	id     string
	exited chan struct{} // closed once the process was reaped
	err    error         // what Wait returned; set before exited is closed
}

// New returns a Provisioner for opts. It starts nothing.
func New(opts Options) (*Provisioner, error) {
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return nil, errs.Invalid(ErrInvalid, "process: Command is empty")
	}
	if opts.Label == "" {
		return nil, errs.Invalid(ErrInvalid, "process: Label is empty")
	}
	for _, r := range opts.Label {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return nil, errs.Invalid(ErrInvalid, "process: Label %q has %q: use letters, digits, '.', '_' and '-'", opts.Label, r)
		}
	}
	for _, e := range opts.Env {
		if !strings.Contains(e, "=") {
			return nil, errs.Invalid(ErrInvalid, "process: Env entry %q is not KEY=VALUE", e)
		}
		if strings.HasPrefix(e, EnvLabel+"=") {
			return nil, errs.Invalid(ErrInvalid, "process: Env sets %s, which the provisioner owns", EnvLabel)
		}
	}
	if opts.StopGrace < 0 {
		return nil, errs.Invalid(ErrInvalid, "process: StopGrace (%v) is negative", opts.StopGrace)
	}
	if opts.StopSignal < 0 {
		return nil, errs.Invalid(ErrInvalid, "process: StopSignal (%d) is negative", opts.StopSignal)
	}
	if err := opts.ReadyOptions.Validate(); err != nil {
		return nil, errs.Invalid(ErrInvalid, "process: ReadyOptions: %v", err)
	}
	if opts.Host == "" {
		opts.Host = defaultHost
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = defaultStopGrace
	}
	if opts.StopSignal == 0 {
		opts.StopSignal = defaultStopSignal
	}
	p := &Provisioner{opts: opts, ready: opts.Ready, children: make(map[int]*child)}
	if p.ready == nil {
		p.ready = func(w Worker) probe.Func { return probe.TCP(w.Addr) }
	}
	return p, nil
}

// Create starts a worker on a free port and waits until it is ready. If the
// worker exits first, or ReadyOptions.Timeout passes, or ctx ends, Create
// kills the worker's process group, reaps it and returns the error; nothing
// is left running.
func (p *Provisioner) Create(ctx context.Context) (Worker, error) {
	if err := errs.Canceled(ctx, "process", "create"); err != nil {
		return Worker{}, err
	}
	id, err := newID()
	if err != nil {
		return Worker{}, err
	}
	port, err := freePort(p.opts.Host)
	if err != nil {
		return Worker{}, fmt.Errorf("process: create: choose a port: %w", err)
	}
	w := Worker{ID: id, Port: port, Addr: net.JoinHostPort(p.opts.Host, strconv.Itoa(port))}
	repl := strings.NewReplacer("{port}", strconv.Itoa(port), "{addr}", w.Addr, "{id}", id)
	args := make([]string, len(p.opts.Command))
	for i, a := range p.opts.Command {
		args[i] = repl.Replace(a)
	}
	// Not CommandContext: the worker outlives the call that created it.
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = p.opts.Dir
	cmd.Env = os.Environ()
	for _, e := range p.opts.Env {
		cmd.Env = append(cmd.Env, repl.Replace(e))
	}
	cmd.Env = append(cmd.Env, EnvLabel+"="+p.opts.Label+":"+id+":"+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = p.opts.Stdout, p.opts.Stderr
	// Its own process group: a stop reaches every process the worker
	// started, and a signal to the owner's group does not reach workers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return Worker{}, fmt.Errorf("process: create: start %s: %w", args[0], err)
	}
	w.PID, w.Created = cmd.Process.Pid, time.Now()
	c := &child{id: id, exited: make(chan struct{})}
	p.mu.Lock()
	p.children[w.PID] = c
	p.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	p.log(slog.LevelDebug, "worker started", w)

	ready := p.ready(w)
	err = probe.Wait(ctx, func(ctx context.Context) error {
		select {
		case <-c.exited:
			return probe.Stop(fmt.Errorf("%w before it was ready: %v", ErrExited, c.err))
		default:
		}
		return ready(ctx)
	}, p.opts.ReadyOptions)
	if err != nil {
		p.kill(w.PID, c)
		return Worker{}, fmt.Errorf("process: create worker %s (%s): %w", id, args[0], err)
	}
	return w, nil
}

// Destroy stops w: StopSignal to its process group, then after StopGrace
// (or at once when ctx ends) SIGKILL, and waits until it has exited and was
// reaped, and until no process of its group is left alive (at most a few
// seconds, or until ctx ends: SIGKILL is delivered asynchronously). A worker that is already gone, destroyed twice or never known to
// this Provisioner, is success; a process whose label does not name w (its
// pid was reused) is never signalled.
func (p *Provisioner) Destroy(ctx context.Context, w Worker) error {
	if w.PID <= 0 {
		return errs.Invalid(ErrInvalid, "process: destroy: worker %q has no PID", w.ID)
	}
	p.mu.Lock()
	c := p.children[w.PID]
	p.mu.Unlock()
	if c != nil && c.id == w.ID {
		return p.stopChild(ctx, w, c)
	}
	return p.stopAdopted(ctx, w)
}

func (p *Provisioner) stopChild(ctx context.Context, w Worker, c *child) error {
	defer p.forget(w.PID, c)
	select {
	case <-c.exited:
		killGroup(w.PID, syscall.SIGKILL) // what it left behind
		waitGroupGone(ctx, w.PID)
		return nil
	default:
	}
	_ = syscall.Kill(-w.PID, p.opts.StopSignal)
	t := time.NewTimer(p.opts.StopGrace)
	defer t.Stop()
	select {
	case <-c.exited:
		killGroup(w.PID, syscall.SIGKILL)
		waitGroupGone(ctx, w.PID)
		p.log(slog.LevelDebug, "worker stopped", w)
		return nil
	case <-t.C:
		p.log(slog.LevelWarn, "worker ignored its stop signal; killing it", w)
	case <-ctx.Done():
		p.log(slog.LevelWarn, "destroy cancelled; killing worker", w)
	}
	killGroup(w.PID, syscall.SIGKILL)
	<-c.exited // SIGKILL cannot be ignored; the reaper returns promptly
	waitGroupGone(ctx, w.PID)
	return nil
}

// stopAdopted stops a worker this Provisioner did not start (one found by
// List, left by an earlier owner): it cannot wait for it, so it polls /proc.
func (p *Provisioner) stopAdopted(ctx context.Context, w Worker) error {
	if !p.owns(w) {
		return nil // gone, or the pid now belongs to someone else
	}
	_ = syscall.Kill(-w.PID, p.opts.StopSignal)
	deadline := time.Now().Add(p.opts.StopGrace)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	killed := false
	for {
		if !p.owns(w) {
			killGroup(w.PID, syscall.SIGKILL)
			waitGroupGone(ctx, w.PID)
			return nil
		}
		if !killed && (time.Now().After(deadline) || ctx.Err() != nil) {
			p.log(slog.LevelWarn, "killing worker", w)
			killGroup(w.PID, syscall.SIGKILL)
			killed = true
		}
		<-tick.C
	}
}

// kill ends a worker that failed to start and waits until it is reaped.
func (p *Provisioner) kill(pid int, c *child) {
	killGroup(pid, syscall.SIGKILL)
	<-c.exited
	p.forget(pid, c)
}

func (p *Provisioner) forget(pid int, c *child) {
	p.mu.Lock()
	if p.children[pid] == c {
		delete(p.children, pid)
	}
	p.mu.Unlock()
}

// Check reports whether w is healthy: an exited worker fails at once with
// ErrExited, a live one must pass its Ready probe once, bounded by
// ReadyOptions.AttemptTimeout.
func (p *Provisioner) Check(ctx context.Context, w Worker) error {
	p.mu.Lock()
	c := p.children[w.PID]
	p.mu.Unlock()
	if c != nil && c.id == w.ID {
		select {
		case <-c.exited:
			return fmt.Errorf("%w: worker %s (pid %d): %v", ErrExited, w.ID, w.PID, c.err)
		default:
		}
	} else if !p.owns(w) {
		return fmt.Errorf("%w: worker %s (pid %d) is gone", ErrExited, w.ID, w.PID)
	}
	timeout := p.opts.ReadyOptions.AttemptTimeout
	if err := probe.Once(ctx, p.ready(w), timeout); err != nil {
		return fmt.Errorf("process: worker %s (pid %d) does not answer: %w", w.ID, w.PID, err)
	}
	return nil
}

// adoptedPoll is how often Watch looks in /proc for a worker it did not
// start, whose exit it cannot wait for.
const adoptedPoll = time.Second

// Watch returns a channel that is closed once w's process has exited, and
// is closed already if it has. A worker this Provisioner started is known
// the moment it is reaped, at no cost; one it did not start (left by an
// earlier owner, or handed over through a shared pool inventory) is looked
// for in /proc every second, by a goroutine that ends with ctx. A pool uses
// it to destroy a worker that died while idle at once.
func (p *Provisioner) Watch(ctx context.Context, w Worker) <-chan struct{} {
	p.mu.Lock()
	c := p.children[w.PID]
	p.mu.Unlock()
	if c != nil && c.id == w.ID {
		return c.exited
	}
	gone := make(chan struct{})
	if w.PID <= 0 || !p.owns(w) {
		close(gone)
		return gone
	}
	go func() {
		t := time.NewTicker(adoptedPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !p.owns(w) {
					close(gone)
					return
				}
			}
		}
	}()
	return gone
}

// ID returns w.ID.
func (p *Provisioner) ID(w Worker) string { return w.ID }

func (p *Provisioner) log(level slog.Level, msg string, w Worker) {
	if p.opts.Logger == nil {
		return
	}
	p.opts.Logger.LogAttrs(context.Background(), level, "process: "+msg,
		slog.String("label", p.opts.Label), slog.String("id", w.ID),
		slog.Int("pid", w.PID), slog.String("addr", w.Addr))
}

// killGroup signals the process group led by pid; a group that is gone is
// not an error.
func killGroup(pid int, sig syscall.Signal) { _ = syscall.Kill(-pid, sig) }

func newID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("process: create: id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// freePort asks the kernel for a free port on host. Another program could
// take it before the worker binds it; the worker then fails its readiness
// probe and Create reports that.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
