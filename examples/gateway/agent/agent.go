// Package agent is the gateway's provisioning layer: it creates, deletes
// and lists the workers that run functions, as worker processes or Docker
// containers. The gateway talks to it through the Agent interface, either
// in its own process (Local) or over gRPC to a separate agent process
// (Serve and Dial).
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ttlkit/ttlkit/pool/docker"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/process"
)

// Agent creates, deletes and lists workers. Every method is safe for
// concurrent use.
type Agent interface {
	Create(ctx context.Context, req CreateRequest) (Worker, error)
	Delete(ctx context.Context, req DeleteRequest) error
	List(ctx context.Context, req ListRequest) ([]Worker, error)
}

// CreateRequest asks for one worker of a function.
type CreateRequest struct {
	Function string `json:"function"`
	// Command runs a process worker; Image a container worker.
	Command []string `json:"command,omitempty"`
	Image   string   `json:"image,omitempty"`
	// Env is the worker's environment, "KEY=VALUE".
	Env []string `json:"env,omitempty"`
	// MemoryMB limits a container's memory.
	MemoryMB int `json:"memory_mb,omitempty"`
	// Key is the caller's name of the worker, given to Options.WorkerOutput.
	Key string `json:"key,omitempty"`
}

// DeleteRequest asks to stop and remove a worker. Deleting a worker that
// is already gone succeeds.
type DeleteRequest struct {
	Function string `json:"function"`
	ID       string `json:"id"`
}

// ListRequest asks for the workers of a function that really exist.
type ListRequest struct {
	Function string `json:"function"`
}

// Worker is a worker as the agent knows it.
type Worker struct {
	ID       string    `json:"id"`
	Function string    `json:"function"`
	Created  time.Time `json:"created"`
	// Exited says that the worker's program has ended but the worker is
	// still there: a container that exited stays until it is deleted (a
	// process that exits is gone at once, and no longer listed).
	Exited bool `json:"exited,omitempty"`
}

// ListResponse carries List's workers over gRPC.
type ListResponse struct {
	Workers []Worker `json:"workers"`
}

// Options configures a Local agent.
type Options struct {
	// Label prefixes the label of every worker ("<Label>.<function>"), so
	// that List finds the workers an earlier run left, and two gateways on
	// one machine do not see each other's. Required.
	Label string
	// Docker, when set, runs image functions as containers on this engine;
	// their network is the host's, so they reach the gateway's Runtime API
	// on 127.0.0.1.
	Docker *client.Client
	// Labels are added to every container, beside docker.LabelPool, which
	// holds "<Label>.<function>".
	Labels map[string]string
	// Output receives the workers' stdout and stderr; nil discards them.
	Output io.Writer
	// WorkerOutput, when set, returns a writer that receives, beside
	// Output, the stdout and stderr of the process worker a CreateRequest
	// with that Key makes (a container's stay with its engine).
	WorkerOutput func(key string) io.Writer
	// StopGrace is how long a worker has to exit after SIGTERM.
	StopGrace time.Duration
	Logger    *slog.Logger
}

// Local is an Agent in this process, on pool/process and pool/docker.
type Local struct {
	opts Options

	mu    sync.Mutex
	procs map[string]*process.Provisioner // by worker id: the one that started it
}

var _ Agent = (*Local)(nil)

// NewLocal returns a Local agent.
func NewLocal(opts Options) (*Local, error) {
	if opts.Label == "" {
		return nil, errors.New("agent: Label is empty")
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 2 * time.Second
	}
	return &Local{opts: opts, procs: map[string]*process.Provisioner{}}, nil
}

func (a *Local) label(fn string) string { return a.opts.Label + "." + fn }

func started(context.Context) error { return nil }

// processes returns a process provisioner for fn with env and the output
// of the worker called key; its Command and output are only used by
// Create.
func (a *Local) processes(fn, key string, cmd, env []string) (*process.Provisioner, error) {
	if len(cmd) == 0 {
		cmd = []string{"true"} // List and Destroy do not run it
	}
	out := a.opts.Output
	if a.opts.WorkerOutput != nil && key != "" {
		if out == nil {
			out = a.opts.WorkerOutput(key)
		} else {
			out = io.MultiWriter(out, a.opts.WorkerOutput(key))
		}
	}
	return process.New(process.Options{
		Command: cmd, Env: env, Label: a.label(fn),
		// The gateway decides readiness (the first poll of the Runtime API).
		Ready:     func(process.Worker) probe.Func { return started },
		StopGrace: a.opts.StopGrace,
		Stdout:    out, Stderr: out,
		Logger: a.opts.Logger,
	})
}

func (a *Local) containers(fn string, req CreateRequest) (*docker.Provisioner, error) {
	if a.opts.Docker == nil {
		return nil, fmt.Errorf("agent: function %s: an image function needs a Docker engine", fn)
	}
	return docker.New(a.opts.Docker, docker.Options{
		Image: req.Image, Env: req.Env, Label: a.label(fn), Labels: a.opts.Labels, NetworkMode: "host",
		Memory:      int64(req.MemoryMB) << 20,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		StopTimeout: a.opts.StopGrace,
		Logger:      a.opts.Logger,
	})
}

// Create starts a worker. It returns once the worker runs; the gateway
// waits for its runtime to poll.
func (a *Local) Create(ctx context.Context, req CreateRequest) (Worker, error) {
	if req.Image != "" {
		p, err := a.containers(req.Function, req)
		if err != nil {
			return Worker{}, err
		}
		c, err := p.Create(ctx)
		if err != nil {
			return Worker{}, err
		}
		return Worker{ID: "c-" + c.ID, Function: req.Function, Created: c.Created}, nil
	}
	p, err := a.processes(req.Function, req.Key, req.Command, req.Env)
	if err != nil {
		return Worker{}, err
	}
	w, err := p.Create(ctx)
	if err != nil {
		return Worker{}, err
	}
	id := "p-" + strconv.Itoa(w.PID) + "-" + w.ID
	a.mu.Lock()
	a.procs[id] = p
	a.mu.Unlock()
	return Worker{ID: id, Function: req.Function, Created: w.Created}, nil
}

// Delete stops and removes a worker; a missing one is not an error.
func (a *Local) Delete(ctx context.Context, req DeleteRequest) error {
	if id, ok := cutPrefix(req.ID, "c-"); ok {
		p, err := a.containers(req.Function, CreateRequest{Image: "-"})
		if err != nil {
			return err
		}
		return p.Destroy(ctx, docker.Container{ID: id})
	}
	a.mu.Lock()
	p := a.procs[req.ID]
	delete(a.procs, req.ID)
	a.mu.Unlock()
	if p == nil { // started by an earlier run: find it by its label
		var err error
		if p, err = a.processes(req.Function, "", nil, nil); err != nil {
			return err
		}
	}
	ws, err := p.List(ctx)
	if err != nil {
		return err
	}
	for _, l := range ws {
		if "p-"+strconv.Itoa(l.Value.PID)+"-"+l.ID == req.ID {
			return p.Destroy(ctx, l.Value)
		}
	}
	return nil // already gone
}

// List returns the function's workers that exist: processes found in /proc
// by label, and containers by label when a Docker engine is set.
func (a *Local) List(ctx context.Context, req ListRequest) ([]Worker, error) {
	p, err := a.processes(req.Function, "", nil, nil)
	if err != nil {
		return nil, err
	}
	ps, err := p.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Worker, 0, len(ps))
	for _, l := range ps {
		out = append(out, Worker{ID: "p-" + strconv.Itoa(l.Value.PID) + "-" + l.ID, Function: req.Function, Created: l.Created})
	}
	if a.opts.Docker != nil {
		d, err := a.containers(req.Function, CreateRequest{Image: "-"})
		if err != nil {
			return nil, err
		}
		cs, err := d.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range cs {
			st := container.ContainerState(l.Value.State)
			out = append(out, Worker{ID: "c-" + l.ID, Function: req.Function, Created: l.Created,
				Exited: st == container.StateExited || st == container.StateDead})
		}
	}
	return out, nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}
