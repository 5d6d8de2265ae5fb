// Package backend is the AI assistant's backend: it gives each
// conversation a sandbox from a warm pool shared by every backend instance,
// runs commands and moves files in it for the conversation's requests, and
// destroys it gracefully — with its files archived for the conversation's
// next sandbox — after an hour without requests, eight hours after it was
// created, or when it stops answering its health checks.
//
// The pieces, all shared through Redis when several instances run (in this
// process's memory otherwise):
//
//   - the warm pool: pool.Pool with pool/redispool (min 2, max 10 across
//     instances, refilled after each assignment, warm sandboxes replaced
//     after 30 minutes unused); an assigned sandbox leaves it for good
//     (Handle.Detach);
//   - the assignment records (Assignments): the design's
//     workspace:container:{conversation_id} hash, found by every instance;
//   - the TTL rules: one entities.Entity per assigned sandbox in an entities.Store
//     (ttl/redisttl), which ttl.Runner on every instance applies every GC
//     interval, handing each expired sandbox to exactly one instance;
//   - the archive: archive.Store, a directory by default.
package backend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/examples/sandboxes/archive"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
	"github.com/ttlkit/ttlkit/ttl"
)

// The design's parameters.
const (
	DefaultInactivityTTL  = 60 * time.Minute // from the completion of the last request
	DefaultAbsoluteTTL    = 8 * time.Hour    // from the sandbox's creation
	DefaultExecTimeout    = 10 * time.Minute // one request
	DefaultHealthInterval = 30 * time.Second
	DefaultGrace          = 30 * time.Second // in-flight requests before a destroy
	DefaultMinWarm        = 2
	DefaultMaxWarm        = 10
	DefaultWarmTTL        = 30 * time.Minute
	DefaultGCInterval     = 60 * time.Second
	// DefaultAssignTimeout bounds one assignment: a warm sandbox (or a new
	// one) plus the restore of the conversation's files.
	DefaultAssignTimeout = 2 * time.Minute
)

// Entity phases of an assigned sandbox in the entities.Store.
const (
	PhaseAssigning = "ASSIGNING" // taken from the pool, files being restored
	PhaseRunning   = "RUNNING"   // serving its conversation (the rules watch it)
	PhaseDestroyed = "DESTROYED" // gone; the entity is deleted
	desiredDestroy = "DESTROYED"
)

// Destroy reasons, as logged and counted.
const (
	ReasonInactive   = "inactive"       // the inactivity TTL passed
	ReasonLifetime   = "lifetime"       // the absolute TTL passed
	ReasonUnhealthy  = "unhealthy"      // health checks failed, or it died mid-request
	ReasonDeleted    = "deleted"        // DELETE /conversations/{id}
	ReasonShutdown   = "shutdown"       // an instance without shared state stopped
	ReasonStale      = "stale"          // its record expired before the GC destroyed it
	ReasonSuperseded = "superseded"     // another instance assigned the conversation first
	ReasonAssignLate = "assign_timeout" // its assignment never finished
	ReasonRecovered  = "recovered"      // decided earlier; the instance that should have destroyed it did not
)

// Errors the HTTP layer maps to statuses.
var (
	// ErrInvalid matches bad input: a conversation id, a command, a
	// timeout, a path.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound matches a conversation without a sandbox or an archive.
	ErrNotFound = errors.New("unknown conversation")
	// ErrDraining matches a request for a sandbox being destroyed.
	ErrDraining = errors.New("the conversation's sandbox is being destroyed")
	// ErrSandboxDied matches a request whose sandbox died under it.
	ErrSandboxDied = errors.New("the sandbox died during the request")
	// ErrBusy matches an assignment that did not finish within
	// AssignTimeout (another instance held the conversation).
	ErrBusy = errors.New("the conversation's sandbox is being assigned")
	// ErrClosed matches requests after Close began.
	ErrClosed = errors.New("the backend is shutting down")
)

// Config is what a Backend needs. Provisioner, Assignments, Entities and
// Archive are required; zero durations and sizes mean the design's values.
type Config struct {
	Provisioner sandbox.Provisioner
	Assignments Assignments
	Entities    entities.Store
	// Inventory shares the warm pool with the other instances; nil keeps
	// it in this process.
	Inventory shared.Inventory
	// Claims holds the claims on assignments and destroys, a lease each
	// (claim.go), shared with the other instances (a lease Store in
	// Redis); nil keeps them in this process, which only a backend whose
	// state is not Shared may do. Its budget must exceed the claims held
	// at once.
	Claims *lease.Manager
	// ClaimGrace is how long the claim of an instance that died in the
	// middle of an assignment outlives its last heartbeat; then another
	// instance takes the conversation over. Zero means 10 s.
	ClaimGrace time.Duration
	Archive    archive.Store
	// Shared says the state is shared with other instances: Close then
	// leaves the assigned sandboxes to them. Otherwise Close destroys
	// them, archiving their files, since nobody would know them after.
	Shared bool
	// Instance names this instance in the shared state and in claims.
	Instance string
	// AgentToken is the token every sandbox's agent requires (the
	// provisioner starts them with it); "" for none.
	AgentToken string
	// APIKey, if set, is required of every request of the HTTP API but
	// GET /healthz (see NewServer).
	APIKey string
	// AllowedHosts are the Host names the HTTP API answers to besides
	// loopback names and IP addresses (webguard.Options.Hosts): any other
	// name is a DNS-rebinding page's, refused before anything runs.
	AllowedHosts []string

	InactivityTTL, AbsoluteTTL, ExecTimeout    time.Duration
	HealthInterval, Grace, WarmTTL, GCInterval time.Duration
	AssignTimeout                              time.Duration
	// OrphanGrace spares a sandbox nobody knows (another instance may be
	// creating it) for this long after its creation; then the pool
	// destroys it as an orphan. It must exceed the time a create takes.
	// Zero means Grace.
	OrphanGrace time.Duration
	// HealthTimeout bounds one health check (and the quick check before
	// a sandbox's files are archived). Zero means 5 s.
	HealthTimeout    time.Duration
	MinWarm, MaxWarm int

	Metrics *Metrics // nil: not counted
	Logger  *slog.Logger
}

func (c *Config) defaults() error {
	switch {
	case c.Provisioner == nil, c.Assignments == nil, c.Entities == nil, c.Archive == nil:
		return errors.New("backend: Provisioner, Assignments, Entities and Archive are required")
	case c.Shared && c.Claims == nil:
		return errors.New("backend: Claims is required when the state is Shared: the instances must see each other's claims")
	case c.MinWarm < 0, c.MaxWarm < 0:
		return fmt.Errorf("backend: warm pool min (%d) and max (%d) must not be negative", c.MinWarm, c.MaxWarm)
	}
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&c.InactivityTTL, DefaultInactivityTTL)
	set(&c.AbsoluteTTL, DefaultAbsoluteTTL)
	set(&c.ExecTimeout, DefaultExecTimeout)
	set(&c.HealthInterval, DefaultHealthInterval)
	set(&c.Grace, DefaultGrace)
	set(&c.WarmTTL, DefaultWarmTTL)
	set(&c.GCInterval, DefaultGCInterval)
	set(&c.AssignTimeout, DefaultAssignTimeout)
	set(&c.HealthTimeout, 5*time.Second)
	set(&c.ClaimGrace, 10*time.Second)
	set(&c.OrphanGrace, c.Grace)
	if c.MaxWarm == 0 {
		c.MaxWarm = DefaultMaxWarm
	}
	if c.MinWarm > c.MaxWarm {
		return fmt.Errorf("backend: warm pool min (%d) > max (%d)", c.MinWarm, c.MaxWarm)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"inactivity TTL", c.InactivityTTL}, {"absolute TTL", c.AbsoluteTTL}, {"exec timeout", c.ExecTimeout},
		{"health interval", c.HealthInterval}, {"grace", c.Grace}, {"warm TTL", c.WarmTTL},
		{"GC interval", c.GCInterval}, {"assign timeout", c.AssignTimeout}, {"claim grace", c.ClaimGrace}} {
		if d.v < 0 {
			return fmt.Errorf("backend: %s (%v) is negative", d.name, d.v)
		}
	}
	if c.Instance == "" {
		c.Instance = newToken()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Backend serves the conversations' requests on their sandboxes. Its
// methods are safe for concurrent use.
type Backend struct {
	cfg    Config
	pool   *pool.Pool[sandbox.Sandbox]
	runner *ttl.Runner
	claims *lease.Manager
	// ownClaims: claims was made by New, and is closed by Close.
	ownClaims bool
	hc        *http.Client
	log       *slog.Logger
	m         *Metrics

	ctx        context.Context // destroys; ended when Close gives up on them
	cancel     context.CancelFunc
	wg         sync.WaitGroup  // destroys
	loopCtx    context.Context // the health and reconcile loops; ended when Close begins
	loopCancel context.CancelFunc
	loops      sync.WaitGroup
	sem        chan struct{} // destroys running at once
	closed     atomic.Bool

	closeOnce sync.Once
	closeErr  error
	assigned  atomic.Int64    // live assignments, as of the last health pass
	waitMu    sync.Mutex      // serializes Reconcile
	waiting   map[string]bool // decided destroys not taken, as of the last Reconcile
	ownerOf   ownerCache      // the sandboxes' owners learned (adopt.go)
}

// New starts a backend: the warm pool (with its start-up cleanup of what an
// earlier process left), the TTL runner and the health and reconcile
// loops. Close stops them.
func New(cfg Config) (*Backend, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	loopCtx, loopCancel := context.WithCancel(context.Background())
	b := &Backend{
		loopCtx: loopCtx, loopCancel: loopCancel,
		cfg: cfg, log: cfg.Logger, m: cfg.Metrics,
		hc:  &http.Client{Transport: agent.Transport()},
		ctx: ctx, cancel: cancel, sem: make(chan struct{}, 4),
	}
	b.claims = cfg.Claims
	if b.claims == nil {
		claims, err := lease.New(claimBudget, lease.Options{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		b.claims, b.ownClaims = claims, true
	}
	p, err := pool.New[sandbox.Sandbox](cfg.Provisioner, pool.Options{
		MinIdle:             cfg.MinWarm,
		MaxIdle:             cfg.MaxWarm,
		MaxSize:             cfg.MaxWarm,
		WarmTTL:             cfg.WarmTTL,
		IdleTimeout:         -1, // warm sandboxes stay up to MaxWarm; WarmTTL replaces stale ones
		MaxLifetime:         -1, // an assigned sandbox is detached: its TTLs are the backend's
		HealthCheckInterval: cfg.HealthInterval,
		CheckOnAcquire:      true,
		JanitorInterval:     cfg.GCInterval,
		OrphanGracePeriod:   cfg.OrphanGrace,
		DestroyTimeout:      cfg.Grace + 30*time.Second,
		// The leftovers of an earlier run go at start; with a shared
		// pool, only those older than the orphan grace (the others'
		// creates in flight are younger).
		CleanupOnStart: true,
		Owned:          b.owned,
		Inventory:      cfg.Inventory,
		Instance:       cfg.Instance,
		OnEvent:        b.poolEvent,
		Logger:         cfg.Logger,
	})
	if err != nil {
		cancel()
		loopCancel()
		return nil, errors.Join(err, b.closeClaims())
	}
	b.pool = p
	rules := []ttl.Rule{
		// The design's two TTLs, whichever comes first.
		{Name: ReasonInactive, Phase: PhaseRunning, Since: ttl.SinceLastActivity, After: cfg.InactivityTTL, Then: desiredDestroy},
		{Name: ReasonLifetime, Phase: PhaseRunning, Since: ttl.SinceCreated, After: cfg.AbsoluteTTL, Then: desiredDestroy},
		// A sandbox whose assignment never finished.
		{Name: ReasonAssignLate, Phase: PhaseAssigning, Since: ttl.SincePhaseChanged, After: cfg.AssignTimeout, Then: desiredDestroy},
	}
	b.runner, err = ttl.NewRunner(cfg.Entities, rules, ttl.RunnerOptions{
		Interval: cfg.GCInterval, Wake: b.wake, Logger: cfg.Logger,
	})
	if err != nil {
		cancel()
		loopCancel()
		return nil, errors.Join(err, p.Close(context.Background()), b.closeClaims())
	}
	b.loops.Add(2)
	go b.loop(cfg.HealthInterval, b.CheckHealth)
	go b.loop(cfg.GCInterval, b.Reconcile)
	return b, nil
}

// Pool returns the warm pool, for its Stats.
func (b *Backend) Pool() *pool.Pool[sandbox.Sandbox] { return b.pool }

// Instance returns this instance's name.
func (b *Backend) Instance() string { return b.cfg.Instance }

func (b *Backend) loop(every time.Duration, step func(context.Context) error) {
	defer b.loops.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.loopCtx.Done():
			return
		case <-t.C:
			if err := step(b.loopCtx); err != nil && b.loopCtx.Err() == nil {
				b.log.Warn("background step failed", "err", err)
			}
		}
	}
}

// Close stops the rules and the loops and lets the destroys in flight
// finish; then, unless the state is shared, it destroys every assigned
// sandbox with its files archived; then it closes the warm pool (with
// shared state only this instance's sandboxes go: the shared warm set
// stays for the others). When ctx ends it gives up on what is left: a
// destroy it abandons stays claimed until its claim expires, and another
// instance finishes it.
func (b *Backend) Close(ctx context.Context) error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		var errs []error
		errs = append(errs, b.runner.Close(ctx))
		b.loopCancel()
		b.loops.Wait()
		stop := context.AfterFunc(ctx, b.cancel)
		defer stop()
		if !b.cfg.Shared {
			errs = append(errs, b.destroyAll(ctx))
		}
		b.wg.Wait()
		b.cancel()
		errs = append(errs, b.pool.Close(ctx))
		errs = append(errs, b.closeClaims())
		b.hc.CloseIdleConnections()
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// closeClaims closes the claims Manager if New made it.
func (b *Backend) closeClaims() error {
	if !b.ownClaims {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.claims.Close(ctx)
}

// destroyAll destroys every assigned sandbox, for a backend whose state
// dies with it.
func (b *Backend) destroyAll(ctx context.Context) error {
	ents, err := b.entities(ctx, entities.Filter{})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, e := range ents {
		conv, sbID, ok := splitID(e.ID)
		if !ok {
			continue
		}
		wg.Go(func() {
			b.sem <- struct{}{}
			defer func() { <-b.sem }()
			if err := b.destroy(ctx, conv, sbID, ReasonShutdown, time.Time{}); err != nil {
				b.log.Warn("destroy at shutdown failed", "conversation", conv, "sandbox", short(sbID), "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// Down destroys every sandbox of the system and returns how many: the
// assigned ones gracefully with their files archived, then every other one
// the provisioner lists (warm, orphaned). Stop every other instance
// first: they would keep creating warm sandboxes.
func (b *Backend) Down(ctx context.Context) (int, error) {
	ents, err := b.entities(ctx, entities.Filter{})
	if err != nil {
		return 0, err
	}
	err = b.destroyAll(ctx)
	listed, lerr := b.cfg.Provisioner.List(ctx)
	if lerr != nil {
		return len(ents), errors.Join(err, lerr)
	}
	for _, l := range listed {
		err = errors.Join(err, b.cfg.Provisioner.Destroy(ctx, l.Value))
	}
	return len(ents) + len(listed), err
}

var convRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckConversation reports whether id can name a conversation: 1 to 128
// letters, digits, '.', '_' and '-', starting with a letter or digit.
func CheckConversation(id string) error {
	if !convRE.MatchString(id) {
		return fmt.Errorf("%w: conversation id %q: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid, id)
	}
	return nil
}

// entityID names the ttl entity of conv's sandbox sbID. Conversation ids
// have no '/', so entities of one conversation sort together.
func entityID(conv, sbID string) string { return conv + "/" + sbID }

func splitID(id string) (conv, sbID string, ok bool) { return strings.Cut(id, "/") }

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// recordTTL is the expiry of an assignment record after a request: the
// inactivity TTL plus time for the GC to destroy the sandbox (two passes
// and the grace), so that the record outlives its sandbox and a request
// never finds a conversation without a record while its sandbox still
// runs.
func (b *Backend) recordTTL() time.Duration {
	return b.cfg.InactivityTTL + 2*b.cfg.GCInterval + 2*b.cfg.Grace
}

func (b *Backend) agent(sb sandbox.Sandbox) *agent.Client {
	return agent.NewClient(sb.Addr(), b.hc, b.cfg.AgentToken)
}

// entities returns every entity f selects, page by page.
func (b *Backend) entities(ctx context.Context, f entities.Filter) ([]entities.Entity, error) {
	var out []entities.Entity
	for {
		page, err := b.cfg.Entities.List(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < entities.ListLimit {
			return out, nil
		}
		f.After = page[len(page)-1].ID
	}
}

// conversationEntities returns the live entities of conv's sandboxes.
func (b *Backend) conversationEntities(ctx context.Context, conv string) ([]entities.Entity, error) {
	page, err := b.cfg.Entities.List(ctx, entities.Filter{After: conv + "/", Limit: 16})
	if err != nil {
		return nil, err
	}
	var out []entities.Entity
	for _, e := range page {
		if !strings.HasPrefix(e.ID, conv+"/") {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// owned is the pool's Options.Owned: the listed sandboxes assigned to a
// conversation (an entity that is not deleted) are never orphans, nor are
// those whose agent names a conversation although the shared state lost
// their assignment: they are adopted again (adopt.go).
func (b *Backend) owned(ctx context.Context, ids []string) ([]string, error) {
	ents, err := b.entities(ctx, entities.Filter{})
	if err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(ents))
	for _, e := range ents {
		if _, sbID, ok := splitID(e.ID); ok {
			live[sbID] = true
		}
	}
	var out []string
	lost := map[string]bool{}
	for _, id := range ids {
		if live[id] {
			out = append(out, id)
		} else {
			lost[id] = true
		}
	}
	if len(lost) == 0 {
		return out, nil
	}
	found, err := b.owners(ctx, lost)
	if err != nil {
		return nil, err
	}
	for _, o := range found {
		out = append(out, o.sb.ID)
		if !b.closed.Load() {
			b.adoptOrphan(o)
		}
	}
	return out, nil
}

func (b *Backend) poolEvent(e pool.Event) {
	switch {
	case e.Err != nil:
		b.log.Warn("pool "+e.Kind.String()+" failed", "sandbox", short(e.ID), "err", e.Err)
	case e.Kind == pool.EventCreated:
		b.log.Debug("warm sandbox created", "sandbox", short(e.ID))
	case e.Kind == pool.EventDestroyed && e.Reason != pool.ReasonLost: // a lost sandbox is forgotten, not destroyed
		b.log.Info("pool sandbox destroyed", "sandbox", short(e.ID), "reason", string(e.Reason))
	}
}
