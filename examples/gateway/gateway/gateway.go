// Package gateway is the serverless gateway's PoolManager: one pool of
// workers per function (a pool.Group), each worker made by the Agent and
// served the Lambda Runtime API, and the Lambda Invoke API in front.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/gateway/template"
	"github.com/ttlkit/ttlkit/pool"
)

// Reasons the gateway destroys a worker for, beside the pool's own.
const (
	ReasonTimeout  pool.Reason = "timeout"  // the invocation ran past the function's Timeout
	ReasonCrashed  pool.Reason = "crashed"  // the runtime exited
	ReasonCanceled pool.Reason = "canceled" // the client left mid-invocation
)

// Config is what a Gateway needs.
type Config struct {
	Agent agent.Agent
	// Runtime serves the workers' Runtime API at RuntimeAddr.
	Runtime     *runtimeapi.Server
	RuntimeAddr string
	// Commands maps a function with CodeUri to the command that runs it;
	// Apply replaces it.
	Commands map[string][]string
	// Build, when set, makes the command that runs a function that
	// Commands leaves out (an image function needs none): Start begins the
	// builds in the background, and each such function is Pending until
	// its build returns, then Active, or Failed with its error.
	Build func(ctx context.Context, f template.Function) ([]string, error)
	// MaxBuilds bounds the builds that run at once. Zero means
	// runtime.GOMAXPROCS(0). The build of the first function (in the
	// order of New's) runs alone, the others wait for it: the builds of
	// one template share most of their work (the dependencies a
	// toolchain's cache holds once built), which builds run at once on a
	// cold cache would each do anew.
	MaxBuilds int
	// IdleTimeout prunes idle workers (GATEWAY_IDLE_TIMEOUT_SECONDS),
	// Heartbeat is the janitor's period (HEARTBEAT_INTERVAL), OrphanGrace
	// spares new workers from reconciliation (ORPHAN_GRACE_PERIOD_SECONDS).
	// A zero IdleTimeout prunes every idle worker above the warm minimum at
	// the next heartbeat, and a zero OrphanGrace spares none.
	IdleTimeout, Heartbeat, OrphanGrace time.Duration
	Metrics                             *Metrics
	Logger                              *slog.Logger
	// Credentials are the access key pairs the Invoke API takes AWS SigV4
	// signatures of (at least one); see NewServer.
	Credentials []sigv4.Credentials
	// Hosts are the host names the HTTP surface answers to besides
	// loopback names and IP addresses (webguard.Options.Hosts).
	Hosts []string
	// Logs, when set, holds the output of the workers (which the agent
	// writes to it), for the tail of an invocation's log; without it the
	// tail holds only the START, END and REPORT lines.
	Logs *Logs
	// EventRetryDelay is the wait before the first retry of a failed
	// asynchronous invocation; the second waits twice as long. Zero means
	// DefaultEventRetryDelay.
	EventRetryDelay time.Duration
	// MaxQueuedEvents bounds the asynchronous invocations held at once;
	// beyond, Invoke answers TooManyRequestsException. Zero means
	// DefaultMaxQueuedEvents.
	MaxQueuedEvents int
}

// known is a worker the gateway made, by its key on the Runtime API.
type known struct {
	w        Worker
	exited   chan struct{} // closed once its runtime is known to have exited
	exitOnce sync.Once
}

func (k *known) exit() { k.exitOnce.Do(func() { close(k.exited) }) }

// Worker is one pooled worker.
type Worker struct {
	ID       string    `json:"id"`  // the agent's id
	Key      string    `json:"key"` // its id on the Runtime API (not its secret, which only its environment holds)
	Function string    `json:"function"`
	Created  time.Time `json:"created"`
}

// Gateway holds the pools. Create it with New, then Start.
type Gateway struct {
	cfg      Config
	fns      atomic.Pointer[functions]
	group    *pool.Group[string, Worker]
	draining atomic.Bool
	inflight atomic.Int64 // invocations being served
	keys     sync.Map     // key -> *known
	log      *slog.Logger
	verifier *sigv4.Verifier

	// The builds (build.go): mu orders their results with Apply; toBuild
	// waits for Start; Close cancels buildCtx and waits for builds; built
	// is closed once the builds Start began (firstBuilds of them) ended.
	mu          sync.Mutex
	started     bool
	toBuild     []pendingBuild
	builds      sync.WaitGroup
	buildSlots  chan struct{}
	buildCtx    context.Context
	stopBuilds  context.CancelFunc
	firstBuilds atomic.Int64
	built       chan struct{}
	firstBuilt  chan struct{}

	// The asynchronous invocations: their goroutines, the context that
	// Close cancels to drop them, and how many are held. eventsClosed,
	// set by Close under eventsMu, keeps a late one from starting.
	events       sync.WaitGroup
	eventsCtx    context.Context
	stopEvents   context.CancelFunc
	queued       atomic.Int64
	eventsMu     sync.Mutex
	eventsClosed bool
}

// functions is one configuration: the template's functions by name and
// their states, with the commands that run them, replaced together by
// Apply.
type functions struct {
	byName map[string]template.Function
	status map[string]*cell
	// loaded is when the configuration was loaded: the functions'
	// LastModified.
	loaded time.Time
}

// New returns a gateway for fns.
func New(cfg Config, fns []template.Function) (*Gateway, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.EventRetryDelay < 0:
		return nil, fmt.Errorf("gateway: EventRetryDelay (%v) is negative", cfg.EventRetryDelay)
	case cfg.MaxQueuedEvents < 0:
		return nil, fmt.Errorf("gateway: MaxQueuedEvents (%d) is negative", cfg.MaxQueuedEvents)
	case cfg.MaxBuilds < 0:
		return nil, fmt.Errorf("gateway: MaxBuilds (%d) is negative", cfg.MaxBuilds)
	}
	if cfg.MaxBuilds == 0 {
		cfg.MaxBuilds = runtime.GOMAXPROCS(0)
	}
	if cfg.EventRetryDelay == 0 {
		cfg.EventRetryDelay = DefaultEventRetryDelay
	}
	if cfg.MaxQueuedEvents == 0 {
		cfg.MaxQueuedEvents = DefaultMaxQueuedEvents
	}
	v, err := sigv4.NewVerifier("lambda", cfg.Credentials...)
	if err != nil {
		return nil, fmt.Errorf("gateway: the Invoke API's credentials: %w", err)
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, verifier: v, buildSlots: make(chan struct{}, cfg.MaxBuilds), built: make(chan struct{}), firstBuilt: make(chan struct{})}
	g.eventsCtx, g.stopEvents = context.WithCancel(context.Background())
	g.buildCtx, g.stopBuilds = context.WithCancel(context.Background())
	g.toBuild = g.setFunctions(fns, cfg.Commands)
	grp, err := pool.NewGroup(g.newPool)
	if err != nil {
		return nil, err
	}
	g.group = grp
	cfg.Runtime.ConnClosed = g.connClosed
	return g, nil
}

// setFunctions makes fns the configuration and returns the functions to
// build. A function is Active with its command in cmds, or with none as
// an image function; else one the configuration had keeps its state (a
// build under way goes on); else, with Config.Build, it is Pending and to
// build, and without, Active with no command (its workers fail to start).
func (g *Gateway) setFunctions(fns []template.Function, cmds map[string][]string) []pendingBuild {
	old := g.fns.Load()
	m := make(map[string]template.Function, len(fns))
	st := make(map[string]*cell, len(fns))
	var build []pendingBuild
	for _, f := range fns {
		m[f.Name] = f
		cmd, ok := cmds[f.Name]
		switch {
		case f.ImageURI != "" || ok:
			st[f.Name] = newCell(&status{FunctionState: FunctionState{State: StateActive}, cmd: slices.Clone(cmd)})
		case old != nil && old.status[f.Name] != nil:
			st[f.Name] = old.status[f.Name]
		case g.cfg.Build != nil:
			st[f.Name] = newCell(&status{FunctionState: FunctionState{State: StatePending, Reason: reasonCreating, ReasonCode: ReasonCreating}})
			build = append(build, pendingBuild{f: f, cell: st[f.Name]})
		default:
			st[f.Name] = newCell(active)
		}
	}
	g.fns.Store(&functions{byName: m, status: st, loaded: time.Now()})
	return build
}

// Function returns the configuration of the function called name.
func (g *Gateway) Function(name string) (template.Function, bool) {
	f, ok := g.fns.Load().byName[name]
	return f, ok
}

// command returns the configuration of the function called name and the
// command that runs it, from one configuration.
func (g *Gateway) command(name string) (template.Function, []string, bool) {
	fs := g.fns.Load()
	f, ok := fs.byName[name]
	if !ok {
		return f, nil, false
	}
	return f, fs.status[name].Load().cmd, true
}

// Start creates every function's pool and waits for their start-up
// cleanup: the workers an earlier run left are deleted. Then it begins the
// builds (Config.Build) in the background, and returns: Built waits for
// them. Apply's builds wait for Start.
func (g *Gateway) Start(ctx context.Context) error {
	if err := g.group.Start(ctx, slices.Sorted(maps.Keys(g.fns.Load().byName))...); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return nil
	}
	g.started = true
	bs := g.toBuild
	g.toBuild = nil
	g.firstBuilds.Store(int64(len(bs)))
	if len(bs) == 0 {
		close(g.built)
		close(g.firstBuilt)
	} else {
		bs[0].lead = true
	}
	g.startBuilds(bs, true)
	return nil
}

// Apply replaces the functions and the commands that run them (a live
// reload of the template): new capacities and warm minimums apply at once,
// new code and environment to the workers created from now on. A function
// no longer in the template answers 404 and keeps no warm minimum, so its
// idle workers go at the idle timeout. A function cmds leaves out keeps its
// state and command (a build under way goes on), or, new, is built as at
// Start; it gets its warm minimum once Active.
func (g *Gateway) Apply(fns []template.Function, cmds map[string][]string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	bs := g.setFunctions(fns, cmds)
	if g.started {
		g.startBuilds(bs, false)
	} else {
		g.toBuild = append(g.toBuild, bs...)
	}
	var errs []error
	for _, f := range fns {
		warm := f.Provisioned
		if g.status(f.Name).State != StateActive {
			warm = 0
		}
		if err := g.setLimits(f.Name, f.Reserved, warm); err != nil {
			errs = append(errs, fmt.Errorf("function %s: %w", f.Name, err))
		}
	}
	for fn, st := range g.group.Stats() {
		if _, ok := g.Function(fn); !ok {
			if err := g.setLimits(fn, st.MaxSize, 0); err != nil {
				errs = append(errs, fmt.Errorf("function %s (removed): %w", fn, err))
			}
		}
	}
	return errors.Join(errs...)
}

// setLimits sets the capacity and warm minimum of fn's pool, creating the
// pool first if fn has none.
func (g *Gateway) setLimits(fn string, maxSize, minIdle int) error {
	p, err := g.group.Pool(fn)
	if err != nil {
		return err
	}
	return p.SetLimits(maxSize, minIdle)
}

// Drain makes new invocations fail with 503 from now on; asynchronous
// ones already accepted keep running (and retrying) until Close.
func (g *Gateway) Drain() { g.draining.Store(true) }

// Idle waits until no invocation is in flight (asynchronous ones that
// run included) or ctx ends.
func (g *Gateway) Idle(ctx context.Context) {
	for g.inflight.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close drops the asynchronous invocations still held (a running one is
// canceled, its worker destroyed), deletes every worker and stops the
// pools.
func (g *Gateway) Close(ctx context.Context) error {
	g.Drain()
	g.eventsMu.Lock()
	g.eventsClosed = true
	g.eventsMu.Unlock()
	g.stopEvents()
	g.events.Wait()
	g.stopBuilds()
	g.builds.Wait()
	return g.group.Close(ctx)
}

// Stats returns every function pool's statistics.
func (g *Gateway) Stats() map[string]pool.Stats { return g.group.Stats() }

func (g *Gateway) newPool(fn string) (pool.Provisioner[Worker], pool.Options, error) {
	f, ok := g.Function(fn)
	if !ok {
		return nil, pool.Options{}, fmt.Errorf("gateway: unknown function %q", fn)
	}
	warm := f.Provisioned
	if g.status(fn).State != StateActive {
		warm = 0 // until it is built
	}
	return &provisioner{g: g, fn: fn}, pool.Options{
		MaxSize:           f.Reserved,
		MinIdle:           warm,
		IdleTimeout:       atLeastNS(g.cfg.IdleTimeout),
		MaxLifetime:       -1, // a worker lives until idle, unhealthy or dead
		JanitorInterval:   g.cfg.Heartbeat,
		OrphanGracePeriod: atLeastNS(g.cfg.OrphanGrace),
		CleanupOnStart:    true,
		CreateTimeout:     30 * time.Second,
		DestroyTimeout:    30 * time.Second,
		Logger:            g.log.With("function", fn),
		OnEvent:           g.cfg.Metrics.onEvent(fn, g.log),
	}, nil
}

// atLeastNS turns a zero duration into the shortest one: the pool reads a
// zero IdleTimeout or OrphanGracePeriod as its default, where the
// gateway's zero means "at once".
func atLeastNS(d time.Duration) time.Duration { return max(d, time.Nanosecond) }

// connClosed runs when a runtime connection of worker key closed: if the
// agent no longer lists the worker, or lists it as exited, it crashed. Its
// pool learns it through the worker's watch and destroys it at once when
// it is idle, so that no invocation is sent to it.
func (g *Gateway) connClosed(key string) {
	v, ok := g.keys.Load(key)
	if !ok {
		return
	}
	k := v.(*known)
	w := k.w
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A crashed process may take a moment to be reaped.
	for range 5 {
		exited, err := g.exited(ctx, w)
		if err != nil {
			return
		}
		if exited {
			g.log.Warn("worker exited", "function", w.Function, "worker", w.ID)
			g.cfg.Runtime.Gone(key)
			k.exit()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exited reports whether the agent no longer lists w, or lists it as
// exited.
func (g *Gateway) exited(ctx context.Context, w Worker) (bool, error) {
	ws, err := g.cfg.Agent.List(ctx, agent.ListRequest{Function: w.Function})
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(ws, func(x agent.Worker) bool { return x.ID == w.ID })
	return i < 0 || ws[i].Exited, nil
}

// exitPoll is how often a worker that is not ready yet is looked for in
// the agent's list, so that one whose program ended is not waited for
// until the create timeout.
const exitPoll = 250 * time.Millisecond

// waitReady waits until w's runtime polls for its first invocation.
func (g *Gateway) waitReady(ctx context.Context, w Worker) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, exitPoll)
		err := g.cfg.Runtime.WaitReady(wctx, w.Key)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if exited, lerr := g.exited(ctx, w); lerr == nil && exited {
			return errors.New("its program ended before its runtime asked for an invocation")
		}
	}
}

// provisioner makes one function's workers through the Agent.
type provisioner struct {
	g  *Gateway
	fn string
}

var (
	_ pool.Provisioner[Worker] = (*provisioner)(nil)
	_ pool.Lister[Worker]      = (*provisioner)(nil)
	_ pool.Watcher[Worker]     = (*provisioner)(nil)
)

func (p *provisioner) Create(ctx context.Context) (Worker, error) {
	f, cmd, ok := p.g.command(p.fn)
	if !ok {
		return Worker{}, fmt.Errorf("gateway: function %s is no longer in the template", p.fn)
	}
	if f.ImageURI == "" && len(cmd) == 0 {
		return Worker{}, fmt.Errorf("gateway: function %s has no command", f.Name)
	}
	key := newKey()
	secret := p.g.cfg.Runtime.Add(key)
	env := []string{
		"AWS_LAMBDA_RUNTIME_API=" + runtimeapi.Endpoint(p.g.cfg.RuntimeAddr, key, secret),
		"AWS_LAMBDA_FUNCTION_NAME=" + f.Name,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(f.MemorySize),
		"AWS_REGION=local",
		"_HANDLER=" + f.Handler,
	}
	for _, k := range slices.Sorted(maps.Keys(f.Env)) {
		env = append(env, k+"="+f.Env[k])
	}
	req := agent.CreateRequest{Function: f.Name, Env: env, MemoryMB: f.MemorySize, Key: key}
	if f.ImageURI != "" {
		req.Image = f.ImageURI
	} else {
		req.Command = cmd
	}
	aw, err := p.g.cfg.Agent.Create(ctx, req)
	if err != nil {
		p.g.cfg.Runtime.Gone(key)
		p.g.cfg.Logs.forget(key)
		return Worker{}, err
	}
	w := Worker{ID: aw.ID, Key: key, Function: f.Name, Created: aw.Created}
	p.g.keys.Store(key, &known{w: w, exited: make(chan struct{})})
	if err := p.g.waitReady(ctx, w); err != nil {
		_ = p.Destroy(context.WithoutCancel(ctx), w)
		return Worker{}, fmt.Errorf("gateway: function %s: worker %s not ready: %w", f.Name, w.ID, err)
	}
	return w, nil
}

// Destroy deletes w, then forgets its Runtime API endpoint: stopped first,
// its runtime is not told to go away (and does not complain of it).
func (p *provisioner) Destroy(ctx context.Context, w Worker) error {
	if w.Key != "" {
		p.g.keys.Delete(w.Key)
		defer p.g.cfg.Runtime.Gone(w.Key)
		defer p.g.cfg.Logs.forget(w.Key)
	}
	return p.g.cfg.Agent.Delete(ctx, agent.DeleteRequest{Function: p.fn, ID: w.ID})
}

// Watch returns a channel closed once w's runtime has exited (connClosed
// saw its connection close and the agent no longer runs it), and closed
// already for a worker the gateway no longer knows, which it cannot
// invoke.
func (p *provisioner) Watch(_ context.Context, w Worker) <-chan struct{} {
	if v, ok := p.g.keys.Load(w.Key); ok {
		return v.(*known).exited
	}
	gone := make(chan struct{})
	close(gone)
	return gone
}

func (p *provisioner) List(ctx context.Context) ([]pool.Listed[Worker], error) {
	ws, err := p.g.cfg.Agent.List(ctx, agent.ListRequest{Function: p.fn})
	if err != nil {
		return nil, err
	}
	out := make([]pool.Listed[Worker], len(ws))
	for i, w := range ws {
		out[i] = pool.Listed[Worker]{ID: w.ID, Value: Worker{ID: w.ID, Function: p.fn, Created: w.Created}, Created: w.Created}
	}
	return out, nil
}

func (p *provisioner) ID(w Worker) string { return w.ID }

func newKey() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
