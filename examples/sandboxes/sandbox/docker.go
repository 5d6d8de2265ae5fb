package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/docker"
	"github.com/ttlkit/ttlkit/pool/probe"
)

// AgentPort is the port the agent listens on inside a container.
const AgentPort = 8080

// WorkDir is the container's writable work directory (a tmpfs); the rest
// of its file system is read-only.
const WorkDir = "/work"

// sandboxUser is the unprivileged user commands run as in a container.
const sandboxUser = "65534:65534"

// DockerOptions configures container sandboxes. Image, Label and Network
// are required.
type DockerOptions struct {
	// Image is the workspace-base image (see BuildImage).
	Image string
	// Label names this system's containers (the io.ttlkit.pool label)
	// and network.
	Label string
	// Network is the internal bridge network the containers join (see
	// EnsureNetwork): the backend reaches each agent at its address on it,
	// the containers reach nothing else.
	Network string
	// AgentArgs are added to the agent's command line ("-max-output", "1048576"),
	// Env to its environment ("SANDBOX_AGENT_TOKEN=...").
	AgentArgs, Env []string
	// Memory (bytes), CPUs and Pids bound each container.
	Memory int64
	CPUs   float64
	Pids   int64
	// WorkSize is the size of the work directory's tmpfs, and TmpSize of
	// /tmp's ("64m"); both are required. Their files count in the
	// container's memory: together they should stay well under Memory, or
	// a full disk ends with the kernel killing the biggest process (the
	// agent) instead of "no space left on device".
	WorkSize, TmpSize string
	// StopTimeout is the time a container gets to stop (docker stop
	// --time).
	StopTimeout time.Duration
	// Ready bounds the wait for a new container's agent (Timeout) and one
	// health check (AttemptTimeout).
	Ready  probe.Options
	Logger *slog.Logger
}

// Docker makes sandboxes that are containers of the workspace-base image:
// read-only root file system with a tmpfs work directory and /tmp, every
// capability dropped, no-new-privileges, an unprivileged user, an init
// that reaps zombies, memory, CPU and process limits, and an internal
// network without outside access.
type Docker struct {
	prov    *docker.Provisioner
	cli     *client.Client
	network string

	mu  sync.Mutex
	ips map[string]netip.Addr // container id → address on the network
}

var _ Provisioner = (*Docker)(nil)

// NewDocker returns a Docker provisioner that drives the engine through cli.
func NewDocker(cli *client.Client, opts DockerOptions) (*Docker, error) {
	if opts.Network == "" {
		return nil, errors.New("sandbox: docker Network is empty")
	}
	if opts.WorkSize == "" || opts.TmpSize == "" {
		// Unbounded, a tmpfs grows until the container's memory limit
		// (or the host's memory) stops it.
		return nil, errors.New("sandbox: docker WorkSize and TmpSize are required")
	}
	d := &Docker{cli: cli, network: opts.Network, ips: map[string]netip.Addr{}}
	work := "rw,exec,nosuid,nodev,size=" + opts.WorkSize + ",uid=65534,gid=65534,mode=0755"
	prov, err := docker.New(cli, docker.Options{
		Image:       opts.Image,
		Cmd:         append([]string{"-listen", ":" + strconv.Itoa(AgentPort), "-dir", WorkDir}, opts.AgentArgs...),
		Env:         opts.Env,
		Label:       opts.Label,
		Labels:      map[string]string{"io.ttlkit.sandboxes": "sandbox"},
		NetworkMode: opts.Network,
		Ready: func(c docker.Container) probe.Func {
			return func(ctx context.Context) error {
				ip, err := d.ip(ctx, c.ID)
				if err != nil {
					return err
				}
				return probe.HTTP("http://" + addr(ip) + "/healthz")(ctx)
			}
		},
		ReadyOptions:   opts.Ready,
		Memory:         opts.Memory,
		NanoCPUs:       int64(opts.CPUs * 1e9),
		PidsLimit:      opts.Pids,
		ReadOnlyRootfs: true,
		Tmpfs:          map[string]string{WorkDir: work, "/tmp": "rw,exec,nosuid,nodev,size=" + opts.TmpSize + ",mode=1777"},
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		User:           sandboxUser,
		Init:           true,
		StopTimeout:    opts.StopTimeout,
		Logger:         opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	d.prov = prov
	return d, nil
}

func addr(ip netip.Addr) string {
	return netip.AddrPortFrom(ip, AgentPort).String()
}

// ip returns the container's address on the sandbox network.
func (d *Docker) ip(ctx context.Context, id string) (netip.Addr, error) {
	d.mu.Lock()
	ip, ok := d.ips[id]
	d.mu.Unlock()
	if ok {
		return ip, nil
	}
	info, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return netip.Addr{}, err
	}
	ns := info.Container.NetworkSettings
	if ns == nil || ns.Networks[d.network] == nil || !ns.Networks[d.network].IPAddress.IsValid() {
		return netip.Addr{}, fmt.Errorf("sandbox: container %.12s has no address on network %s", id, d.network)
	}
	ip = ns.Networks[d.network].IPAddress
	d.mu.Lock()
	d.ips[id] = ip
	d.mu.Unlock()
	return ip, nil
}

// Kind returns "docker".
func (d *Docker) Kind() string { return "docker" }

// Create creates and starts a container and waits until its agent answers.
func (d *Docker) Create(ctx context.Context) (Sandbox, error) {
	c, err := d.prov.Create(ctx)
	if err != nil {
		return Sandbox{}, err
	}
	ip, err := d.ip(ctx, c.ID)
	if err != nil {
		_ = d.prov.Destroy(context.WithoutCancel(ctx), c)
		return Sandbox{}, err
	}
	return Sandbox{ID: c.ID, Host: ip.String(), Port: AgentPort, Created: c.Created}, nil
}

// Destroy stops the container (SIGTERM, then SIGKILL after StopTimeout)
// and removes it.
func (d *Docker) Destroy(ctx context.Context, s Sandbox) error {
	err := d.prov.Destroy(ctx, docker.Container{ID: s.ID})
	d.mu.Lock()
	delete(d.ips, s.ID)
	d.mu.Unlock()
	return err
}

// Check reports whether the container runs and its agent answers.
func (d *Docker) Check(ctx context.Context, s Sandbox) error {
	return d.prov.Check(ctx, docker.Container{ID: s.ID})
}

// List returns every container with this label, in any state.
func (d *Docker) List(ctx context.Context) ([]pool.Listed[Sandbox], error) {
	cs, err := d.prov.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]pool.Listed[Sandbox], len(cs))
	for i, c := range cs {
		out[i] = pool.Listed[Sandbox]{ID: c.ID, Value: Sandbox{ID: c.ID, Port: AgentPort, Created: c.Created}, Created: c.Created}
	}
	return out, nil
}

// ID returns s.ID.
func (d *Docker) ID(s Sandbox) string { return s.ID }

// Resolve fills in the address of s, a container as List reports it
// (List does not inspect each container for its address).
func (d *Docker) Resolve(ctx context.Context, s Sandbox) (Sandbox, error) {
	ip, err := d.ip(ctx, s.ID)
	if err != nil {
		return s, err
	}
	s.Host, s.Port = ip.String(), AgentPort
	return s, nil
}

// EnsureNetwork creates the internal bridge network name unless it exists:
// no route outside, no traffic between containers (enable_icc=false), and
// the host — the backend — reaches every container at its address. Every
// backend instance on the engine shares it; it is never removed.
func EnsureNetwork(ctx context.Context, cli *client.Client, name, label string) error {
	if _, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{}); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("sandbox: network %s: %w", name, err)
	}
	_, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver:   "bridge",
		Internal: true,
		Options:  map[string]string{"com.docker.network.bridge.enable_icc": "false"},
		Labels:   map[string]string{docker.LabelPool: label},
	})
	if err != nil && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("sandbox: create network %s: %w", name, err)
	}
	return nil
}

// RemoveDocker removes what the system made on the engine under label:
// every container with the label (running or not, without a graceful
// stop), the network, and the given images. What is already gone is not an
// error.
func RemoveDocker(ctx context.Context, cli *client.Client, label string, images ...string) error {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", docker.LabelPool+"="+label),
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range res.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if _, err := cli.NetworkRemove(ctx, label, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, err)
	}
	for _, image := range images {
		if _, err := cli.ImageRemove(ctx, image, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
