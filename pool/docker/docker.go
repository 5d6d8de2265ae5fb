// Package docker is a pool.Provisioner of Docker containers on the Docker
// Engine API (github.com/moby/moby/client): each item is a container
// created from an image with labels, resource limits and security options,
// started, ready when a probe says so, stopped with a timeout and removed.
//
// Every container carries the label LabelPool with the provisioner's Label,
// so List finds the containers that really exist — including those an
// earlier, crashed owner started — and a pool's start-up cleanup and
// reconciliation can remove them. Watch follows the engine's "die" events,
// so a pool destroys a container that died while idle at once. Importing this package is what brings the
// Docker client into a program; the pool package does not depend on it.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/probe"
)

// Labels every container of a Provisioner carries.
const (
	// LabelPool holds Options.Label; List filters on it.
	LabelPool = "io.ttlkit.pool"
)

// Defaults of the Options fields left zero, and a bound of the provisioner's own.
const (
	defaultStopTimeout = 10 * time.Second
	// cleanupTimeout bounds the removal of a container that failed
	// to start, which runs even when the caller's context has ended, and
	// the engine's create call, which Create lets finish past its context
	// so that it never loses a container the engine made.
	cleanupTimeout = 30 * time.Second
)

var (
	// ErrInvalid matches every error about bad options or arguments.
	ErrInvalid = errors.New("docker: invalid argument")
	// ErrExited matches the error Check and Create return for a container
	// that is not running.
	ErrExited = errors.New("docker: container not running")
)

// Container is one container. Its exported fields describe it completely,
// so a shared pool inventory can hand it to another process as JSON.
type Container struct {
	// ID is the engine's container id.
	ID string `json:"id"`
	// Name is the container's name.
	Name string `json:"name"`
	// Addr is host:port where Options.Port is published on the host
	// (127.0.0.1 and a port the engine chose); "" without a Port.
	Addr string `json:"addr,omitempty"`
	// Created is when the engine created it.
	Created time.Time `json:"created"`
	// State is the engine's state of the container when Create or List saw
	// it: "running", "exited", "dead", "created", ... A container that
	// exited stays listed, in state "exited", until it is destroyed.
	State string `json:"state,omitempty"`
}

// Options configures a Provisioner. Image and Label are required.
type Options struct {
	// Image is the image to run; it must exist on the engine (Create does
	// not pull).
	Image string
	// Cmd overrides the image's command; Env is the container's
	// environment ("KEY=VALUE").
	Cmd, Env []string
	// Label names the containers of this provisioner (the LabelPool label):
	// List reports only containers with this label.
	Label string
	// Labels are added to every container.
	Labels map[string]string
	// Port is the container's TCP port to publish on 127.0.0.1 at a port
	// the engine chooses; Container.Addr tells where. 0 publishes nothing.
	Port int
	// Ready returns the probe that tells when c is ready; nil means a TCP
	// connect to c.Addr when Port is set, else only that it runs. Check
	// runs it once too.
	Ready func(c Container) probe.Func
	// ReadyOptions bounds the wait for readiness in Create (its Timeout)
	// and one health probe in Check (its AttemptTimeout).
	ReadyOptions probe.Options
	// Memory (bytes), NanoCPUs (billionths of a CPU) and PidsLimit bound
	// the container's resources; 0 means no limit.
	Memory, NanoCPUs, PidsLimit int64
	// ReadOnlyRootfs mounts the image's file system read-only; Tmpfs adds
	// writable tmpfs mounts (path → mount options, as "size=64m").
	ReadOnlyRootfs bool
	Tmpfs          map[string]string
	// CapDrop and CapAdd drop and add kernel capabilities ("ALL" drops
	// every one); SecurityOpt are the engine's security options
	// ("no-new-privileges").
	CapDrop, CapAdd, SecurityOpt []string
	// NetworkMode is the container's network: "" the engine's default
	// bridge, "none" no network at all (no Port then).
	NetworkMode string
	// User runs the container's process as this user ("65534:65534").
	User string
	// Init runs an init process in the container that reaps zombies.
	Init bool
	// StopTimeout is how long Destroy waits after SIGTERM before the
	// engine kills the container. Zero means 10 seconds.
	StopTimeout time.Duration
	// Logger, when set, logs starts and stops at Debug.
	Logger *slog.Logger
}

// Provisioner creates and removes containers. It implements
// pool.Provisioner, pool.Checker, pool.Lister and pool.Watcher for
// Container, and is safe for concurrent use. It starts no goroutine but,
// while containers are watched, the one that reads the engine's events.
type Provisioner struct {
	cli     *client.Client
	opts    Options
	ready   func(Container) probe.Func
	watches watcher
}

var (
	_ pool.Provisioner[Container] = (*Provisioner)(nil)
	_ pool.Checker[Container]     = (*Provisioner)(nil)
	_ pool.Lister[Container]      = (*Provisioner)(nil)
	_ pool.Watcher[Container]     = (*Provisioner)(nil)
)

// New returns a Provisioner that drives the engine through cli. It does not
// contact the engine.
func New(cli *client.Client, opts Options) (*Provisioner, error) {
	switch {
	case cli == nil:
		return nil, errs.Invalid(ErrInvalid, "docker: client is nil")
	case opts.Image == "":
		return nil, errs.Invalid(ErrInvalid, "docker: Image is empty")
	case opts.Label == "":
		return nil, errs.Invalid(ErrInvalid, "docker: Label is empty")
	case opts.Port < 0 || opts.Port > 65535:
		return nil, errs.Invalid(ErrInvalid, "docker: Port (%d) is not a TCP port", opts.Port)
	case opts.Port != 0 && opts.NetworkMode == "none":
		return nil, errs.Invalid(ErrInvalid, "docker: Port (%d) with NetworkMode \"none\": a container without a network publishes no port", opts.Port)
	case opts.Memory < 0, opts.NanoCPUs < 0, opts.PidsLimit < 0:
		return nil, errs.Invalid(ErrInvalid, "docker: Memory (%d), NanoCPUs (%d) and PidsLimit (%d) must not be negative", opts.Memory, opts.NanoCPUs, opts.PidsLimit)
	case opts.StopTimeout < 0:
		return nil, errs.Invalid(ErrInvalid, "docker: StopTimeout (%v) is negative", opts.StopTimeout)
	}
	if _, ok := opts.Labels[LabelPool]; ok {
		return nil, errs.Invalid(ErrInvalid, "docker: Labels sets %s, which the provisioner owns", LabelPool)
	}
	if err := opts.ReadyOptions.Validate(); err != nil {
		return nil, errs.Invalid(ErrInvalid, "docker: ReadyOptions: %v", err)
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = defaultStopTimeout
	}
	p := &Provisioner{cli: cli, opts: opts, ready: opts.Ready}
	p.watches.byID = map[string]map[*watch]struct{}{}
	if p.ready == nil {
		p.ready = func(c Container) probe.Func {
			if c.Addr == "" {
				return func(context.Context) error { return nil }
			}
			return probe.TCP(c.Addr)
		}
	}
	return p, nil
}

// Create creates and starts a container and waits until it is ready. If it
// exits first, or ReadyOptions.Timeout passes, or ctx ends, Create removes
// the container (even when ctx has ended) and returns the error.
func (p *Provisioner) Create(ctx context.Context) (Container, error) {
	if err := errs.Canceled(ctx, "docker", "create"); err != nil {
		return Container{}, err
	}
	labels := maps.Clone(p.opts.Labels)
	if labels == nil {
		labels = make(map[string]string, 1)
	}
	labels[LabelPool] = p.opts.Label
	cfg := &container.Config{Image: p.opts.Image, Cmd: p.opts.Cmd, Env: p.opts.Env, Labels: labels, User: p.opts.User}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(p.opts.NetworkMode),
		ReadonlyRootfs: p.opts.ReadOnlyRootfs,
		Tmpfs:          p.opts.Tmpfs,
		CapDrop:        p.opts.CapDrop,
		CapAdd:         p.opts.CapAdd,
		SecurityOpt:    p.opts.SecurityOpt,
		Resources: container.Resources{
			Memory:   p.opts.Memory,
			NanoCPUs: p.opts.NanoCPUs,
		},
	}
	if p.opts.Memory > 0 {
		hc.Resources.MemorySwap = p.opts.Memory // no swap beyond the limit
	}
	if p.opts.PidsLimit > 0 {
		hc.Resources.PidsLimit = &p.opts.PidsLimit
	}
	if p.opts.Init {
		hc.Init = &p.opts.Init
	}
	var port network.Port
	if p.opts.Port != 0 {
		var err error
		port, err = network.ParsePort(strconv.Itoa(p.opts.Port) + "/tcp")
		if err != nil {
			return Container{}, fmt.Errorf("docker: create: port: %w", err)
		}
		cfg.ExposedPorts = network.PortSet{port: {}}
		hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1")}}}
	}
	// The create itself is not cut short by ctx: a create whose answer is
	// lost (ctx ended after the engine made the container) would leave a
	// container nobody knows. It runs to its answer, bounded by
	// cleanupTimeout, and what it made is removed if ctx has ended.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	created, err := p.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
	ccancel()
	if err != nil {
		return Container{}, errs.Wrap(ctx, "docker", "create", err)
	}
	c := Container{ID: created.ID}
	fail := func(err error) (Container, error) {
		// The caller's ctx may have ended: remove on a context of our own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, rerr := p.cli.ContainerRemove(rctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			err = fmt.Errorf("%w (and removing it failed: %v)", err, rerr)
		}
		return Container{}, err
	}
	if err := errs.Canceled(ctx, "docker", "create"); err != nil {
		return fail(err)
	}
	if _, err := p.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fail(errs.Wrap(ctx, "docker", "start "+short(c.ID), err))
	}
	info, err := p.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return fail(errs.Wrap(ctx, "docker", "inspect "+short(c.ID), err))
	}
	if st := info.Container.State; st != nil && !st.Running {
		return fail(fmt.Errorf("docker: create %s from %s: %w: it is %s (exit code %d%s)",
			short(c.ID), p.opts.Image, ErrExited, st.Status, st.ExitCode, oom(st.OOMKilled)))
	}
	c.Name = trimSlash(info.Container.Name)
	c.State = string(container.StateRunning)
	if t, err := time.Parse(time.RFC3339Nano, info.Container.Created); err == nil {
		c.Created = t
	}
	if p.opts.Port != 0 {
		if info.Container.NetworkSettings == nil || len(info.Container.NetworkSettings.Ports[port]) == 0 {
			return fail(fmt.Errorf("docker: create %s: port %d was not published", short(c.ID), p.opts.Port))
		}
		b := info.Container.NetworkSettings.Ports[port][0]
		c.Addr = net.JoinHostPort("127.0.0.1", b.HostPort)
	}
	p.log("container started", c)
	ready := p.ready(c)
	err = probe.Wait(ctx, func(ctx context.Context) error {
		if err := ready(ctx); err != nil {
			if rerr := p.running(ctx, c); errors.Is(rerr, ErrExited) {
				return probe.Stop(rerr)
			}
			return err
		}
		return nil
	}, p.opts.ReadyOptions)
	if err != nil {
		return fail(fmt.Errorf("docker: create %s from %s: %w", short(c.ID), p.opts.Image, err))
	}
	return c, nil
}

// running returns nil if c runs, an error matching ErrExited if it does not
// (or no longer exists), or the engine's error.
func (p *Provisioner) running(ctx context.Context, c Container) error {
	info, err := p.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %s is gone", ErrExited, short(c.ID))
	}
	if err != nil {
		return errs.Wrap(ctx, "docker", "inspect "+short(c.ID), err)
	}
	if st := info.Container.State; st == nil || !st.Running {
		if st == nil {
			return fmt.Errorf("%w: %s has no state", ErrExited, short(c.ID))
		}
		return fmt.Errorf("%w: %s is %s (exit code %d%s)", ErrExited, short(c.ID), st.Status, st.ExitCode, oom(st.OOMKilled))
	}
	return nil
}

// Destroy stops c (SIGTERM, then SIGKILL after StopTimeout) and removes it
// with its anonymous volumes. A container that is already gone, or being
// removed by another call, is success.
func (p *Provisioner) Destroy(ctx context.Context, c Container) error {
	if c.ID == "" {
		return errs.Invalid(ErrInvalid, "docker: destroy: container has no ID")
	}
	secs := int((p.opts.StopTimeout + time.Second - 1) / time.Second)
	if _, err := p.cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &secs}); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil {
			return errs.Wrap(ctx, "docker", "stop "+short(c.ID), err)
		}
		// Remove with Force below kills it anyway.
	}
	_, err := p.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		p.log("container removed", c)
		return nil
	case cerrdefs.IsConflict(err):
		// Another call is removing it: wait until it is gone.
		return p.waitGone(ctx, c)
	}
	return errs.Wrap(ctx, "docker", "remove "+short(c.ID), err)
}

func (p *Provisioner) waitGone(ctx context.Context, c Container) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		_, err := p.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return errs.Wrap(ctx, "docker", "remove "+short(c.ID), context.Cause(ctx))
		}
	}
}

// Check reports whether c is healthy: a container that is not running
// fails with ErrExited, a running one must pass its Ready probe once,
// bounded by ReadyOptions.AttemptTimeout.
func (p *Provisioner) Check(ctx context.Context, c Container) error {
	if err := p.running(ctx, c); err != nil {
		return err
	}
	if err := probe.Once(ctx, p.ready(c), p.opts.ReadyOptions.AttemptTimeout); err != nil {
		return fmt.Errorf("docker: container %s does not answer: %w", short(c.ID), err)
	}
	return nil
}

// List returns every container with this Provisioner's label, in any
// state: those it created and those an earlier owner left behind.
func (p *Provisioner) List(ctx context.Context) ([]pool.Listed[Container], error) {
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelPool+"="+p.opts.Label),
	})
	if err != nil {
		return nil, errs.Wrap(ctx, "docker", "list", err)
	}
	out := make([]pool.Listed[Container], 0, len(res.Items))
	for _, s := range res.Items {
		c := Container{ID: s.ID, Created: time.Unix(s.Created, 0), State: string(s.State)}
		if len(s.Names) > 0 {
			c.Name = trimSlash(s.Names[0])
		}
		for _, ps := range s.Ports {
			if int(ps.PrivatePort) == p.opts.Port && ps.PublicPort != 0 {
				c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ps.PublicPort)))
			}
		}
		out = append(out, pool.Listed[Container]{ID: c.ID, Value: c, Created: c.Created})
	}
	return out, nil
}

// ID returns c.ID.
func (p *Provisioner) ID(c Container) string { return c.ID }

func (p *Provisioner) log(msg string, c Container) {
	if p.opts.Logger == nil {
		return
	}
	p.opts.Logger.LogAttrs(context.Background(), slog.LevelDebug, "docker: "+msg,
		slog.String("label", p.opts.Label), slog.String("id", short(c.ID)), slog.String("addr", c.Addr))
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func trimSlash(name string) string {
	if len(name) > 0 && name[0] == '/' {
		return name[1:]
	}
	return name
}

func oom(killed bool) string {
	if killed {
		return ", killed for memory"
	}
	return ""
}
