package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/process"
)

// ProcessOptions configures process sandboxes.
type ProcessOptions struct {
	// Agent is the command that runs the agent, to which the provisioner
	// adds "-listen" and "-dir" (e.g. [this program, "agent"]). Required.
	Agent []string
	// Label names this system's sandboxes (the process label). Required.
	Label string
	// Root is where each sandbox gets its work directory, Root/<id>.
	// Required.
	Root string
	// StopGrace is how long a sandbox may take to stop after SIGTERM
	// before its process group is killed.
	StopGrace time.Duration
	// Ready bounds the wait for a new sandbox's agent (Timeout) and one
	// health check (AttemptTimeout).
	Ready probe.Options
	// Env is added to the agents' environment ("SANDBOX_AGENT_TOKEN=...").
	Env []string
	// Output receives the agents' stderr (their warnings); nil discards
	// it. Their stdout is discarded.
	Output io.Writer
	Logger *slog.Logger
}

// Process makes sandboxes that are local processes: the agent in a process
// group of its own, on a port of its own, in Root/<id>. It isolates
// nothing (the commands run as this user, on this machine's network); it
// is the embedded default for trying the system with only Go.
type Process struct {
	prov *process.Provisioner
	root string
}

var _ Provisioner = (*Process)(nil)

// NewProcess returns a Process provisioner.
func NewProcess(opts ProcessOptions) (*Process, error) {
	if len(opts.Agent) == 0 {
		return nil, errors.New("sandbox: process Agent command is empty")
	}
	if opts.Root == "" {
		return nil, errors.New("sandbox: process Root is empty")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cmd := append(append([]string(nil), opts.Agent...), "-listen", "{addr}", "-dir", filepath.Join(root, "{id}"))
	prov, err := process.New(process.Options{
		Command:      cmd,
		Env:          opts.Env,
		Label:        opts.Label,
		Ready:        func(w process.Worker) probe.Func { return ownAgent(w) },
		ReadyOptions: opts.Ready,
		StopGrace:    opts.StopGrace,
		Stderr:       opts.Output,
		Logger:       opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Process{prov: prov, root: root}, nil
}

// ownAgent is the readiness and health probe of w: its agent answers
// /healthz, and it is w's own. A port the provisioner chose free can be
// taken before the agent binds it — by another sandbox's agent, whose
// create chose it too — and then w's agent exits, while /healthz on the
// port answers for the other sandbox: without the check, the two
// conversations would share one.
func ownAgent(w process.Worker) probe.Func {
	url := "http://" + w.Addr + "/healthz"
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		switch dir := resp.Header.Get(agent.HeaderDir); {
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		case dir != w.ID:
			return fmt.Errorf("GET %s: the agent there serves %q, not sandbox %s", url, dir, w.ID)
		}
		return nil
	}
}

func fromWorker(w process.Worker) Sandbox {
	host, _, err := net.SplitHostPort(w.Addr)
	if err != nil {
		host = "127.0.0.1" // the provisioner's default Host
	}
	return Sandbox{ID: w.ID, Host: host, Port: w.Port, Created: w.Created, PID: w.PID}
}

func toWorker(s Sandbox) process.Worker {
	return process.Worker{ID: s.ID, PID: s.PID, Port: s.Port, Addr: s.Addr(), Created: s.Created}
}

// Kind returns "process".
func (p *Process) Kind() string { return "process" }

// Create starts an agent and waits until it answers /healthz.
func (p *Process) Create(ctx context.Context) (Sandbox, error) {
	w, err := p.prov.Create(ctx)
	if err != nil {
		return Sandbox{}, err
	}
	return fromWorker(w), nil
}

// Destroy stops the agent and everything it started, then removes its work
// directory. The agent gets SIGTERM, and SIGKILL after StopGrace: on
// SIGTERM it stops its execs' shims, each of which kills every process its
// command started, however detached; killed, it closes their stop pipes,
// and they do the same on their own.
func (p *Process) Destroy(ctx context.Context, s Sandbox) error {
	err := p.prov.Destroy(ctx, toWorker(s))
	if rerr := p.removeDir(s.ID); err == nil {
		err = rerr
	}
	return err
}

func (p *Process) removeDir(id string) error {
	if id == "" || id != filepath.Base(id) || id[0] == '.' {
		return fmt.Errorf("sandbox: id %q is not a plain name", id)
	}
	return os.RemoveAll(filepath.Join(p.root, id))
}

// Check reports whether the agent runs and answers /healthz.
func (p *Process) Check(ctx context.Context, s Sandbox) error {
	return p.prov.Check(ctx, toWorker(s))
}

// List returns the live agents with this label.
func (p *Process) List(ctx context.Context) ([]pool.Listed[Sandbox], error) {
	ws, err := p.prov.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]pool.Listed[Sandbox], len(ws))
	for i, w := range ws {
		out[i] = pool.Listed[Sandbox]{ID: w.ID, Value: fromWorker(w.Value), Created: w.Created}
	}
	return out, nil
}

// ID returns s.ID.
func (p *Process) ID(s Sandbox) string { return s.ID }

// SweepDirs removes the work directories under Root of sandboxes that no
// longer run and were last modified more than age ago: those of agents
// killed with SIGKILL, whose Destroy never ran. It returns how many it
// removed.
func (p *Process) SweepDirs(ctx context.Context, age time.Duration) (int, error) {
	listed, err := p.prov.List(ctx)
	if err != nil {
		return 0, err
	}
	live := make(map[string]bool, len(listed))
	for _, l := range listed {
		live[l.ID] = true
	}
	ents, err := os.ReadDir(p.root)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || live[e.Name()] || !e.IsDir() || time.Since(info.ModTime()) < age {
			continue
		}
		if p.removeDir(e.Name()) == nil {
			n++
		}
	}
	return n, nil
}
