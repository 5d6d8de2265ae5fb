// Package controller is the workspace controller (WC): it moves each
// workspace's phase to its desired state. RUNNING starts the workspace's
// server (restoring its files first when it was ARCHIVED), STANDBY stops
// the server and keeps the files, ARCHIVED packs the files into an archive
// and removes them.
//
// It owns phase, phase_changed_at (the store moves it only when the phase
// really changes: the design's CASE WHEN) and operation. An operation is
// claimed twice: as a lease (package lease; the holder is the workspace, so
// at most one lives per workspace), kept alive while the operation runs,
// then on the row by a compare-and-set that writes it where there was none
// (UPDATE ... WHERE operation = 'NONE'). Of two controllers that reach a
// workspace at once exactly one acts. A workspace whose row shows an
// operation but whose lease is gone was left by a controller that died
// (kill -9, a lost machine): the next controller to look at it takes the
// lease and runs the operation again from its start (each is idempotent)
// within the lease's grace, so nothing stays stuck. A STANDBY
// decision is carried out only if no activity arrived since it was made:
// otherwise the controller clears it and the workspace stays RUNNING.
//
// The controller acts when woken (Wake: the runner's decisions, a proxy's
// request to run) and on a full reconcile every Interval, which finds
// every workspace whose desired state is not yet its phase.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/internal/claim"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/ttl"
)

// Runtime does the work on a workspace's server and files. The controller
// never calls two of its methods for one workspace at once.
type Runtime interface {
	// Start starts the workspace's server on its files (creating an empty
	// directory for a new workspace); a server already running is
	// success.
	Start(ctx context.Context, id string) error
	// Stop stops the server; its files stay. Not running is success.
	Stop(ctx context.Context, id string) error
	// Archive packs the files into an archive and removes them.
	Archive(ctx context.Context, id string) error
	// Restore unpacks the archive, if there is one, and removes it.
	Restore(ctx context.Context, id string) error
	// Alive reports whether the server runs and answers.
	Alive(ctx context.Context, id string) bool
}

// Defaults of Options.
const (
	DefaultInterval         = 30 * time.Second
	DefaultWorkers          = 8
	DefaultOperationTimeout = 2 * time.Minute
	DefaultClaimGrace       = 10 * time.Second
)

// Options configure a Controller. Standby is required.
type Options struct {
	// Standby is the standby TTL (TTL_STANDBY_SECONDS): a workspace whose
	// last activity is more recent than that has been active since the
	// runner decided STANDBY, and is kept.
	Standby time.Duration
	// Interval is how often the full reconcile runs. 0 means
	// DefaultInterval; negative means never (tests call ReconcileAll).
	Interval time.Duration
	// Workers is how many workspaces are operated on at once. 0 means
	// DefaultWorkers.
	Workers int
	// OperationTimeout bounds one operation (a start, a stop, an archive).
	// 0 means DefaultOperationTimeout.
	OperationTimeout time.Duration
	// Claims holds the claims on operations, a lease per workspace in
	// operation. Controllers that share a table must share its store (a
	// lease/sqllease store beside the table). Nil means a Manager on a
	// new MemoryStore: one controller, whose table lives in its process.
	// The Manager's budget bounds the operations in progress at once
	// across every controller; a claim refused for the budget waits for
	// the next round.
	Claims *lease.Manager
	// ClaimGrace is how long a claim outlives its controller's last
	// heartbeat: how soon after a controller dies another takes its
	// operations over. 0 means DefaultClaimGrace.
	ClaimGrace time.Duration
	// Name names this controller in its claims (the leases' Resource).
	Name string
	// Logger receives the controller's logs; nil discards them.
	Logger *slog.Logger
}

// Stats counts what a Controller did.
type Stats struct {
	// Started, Stopped, Archived and Restored count completed operations.
	Started, Stopped, Archived, Restored uint64
	// Kept counts STANDBY decisions cleared because activity arrived
	// after them.
	Kept uint64
	// Conflicts counts compare-and-sets another writer won, and claims
	// another controller held.
	Conflicts uint64
	// TakenOver counts operations taken over from a controller that
	// stopped holding their claim (it died, or lost its store).
	TakenOver uint64
	// Abandoned counts operations this controller stopped because it lost
	// their claim: another may have taken them over.
	Abandoned uint64
	// Errors counts failed operations and store calls.
	Errors uint64
	// Reconciles counts full reconciles; Woken, workspaces woken.
	Reconciles, Woken uint64
	// Busy is the number of operations in progress; Queued the number of
	// workspaces waiting for a worker.
	Busy, Queued int
}

// Controller reconciles workspaces. Close stops it.
type Controller struct {
	store entities.Store
	rt    Runtime
	opts  Options
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]ttl.Expiry // queued, with the latest decision known
	order   []string
	active  map[string]bool
	closed  bool
	signal  chan struct{}

	claims    *lease.Manager
	ownClaims bool // claims was made here, and is closed by Close

	started, stopped, archived, restored, kept, conflicts, errs, reconciles, woken, takenOver, abandoned atomic.Uint64
	busy                                                                                                 atomic.Int64

	ctx    context.Context // ends the loops; operations in progress finish
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Controller over store and rt and starts its workers and
// its reconcile loop (which reconciles once at once).
func New(store entities.Store, rt Runtime, opts Options) (*Controller, error) {
	switch {
	case store == nil || rt == nil:
		return nil, errors.New("controller: store and runtime are required")
	case opts.Standby <= 0:
		return nil, fmt.Errorf("controller: Standby (%v) must be positive", opts.Standby)
	case opts.Workers < 0:
		return nil, fmt.Errorf("controller: Workers (%d) is negative", opts.Workers)
	case opts.ClaimGrace < 0:
		return nil, fmt.Errorf("controller: ClaimGrace (%v) is negative", opts.ClaimGrace)
	}
	opts.Interval = cmp.Or(opts.Interval, DefaultInterval)
	opts.Workers = cmp.Or(opts.Workers, DefaultWorkers)
	opts.OperationTimeout = cmp.Or(max(opts.OperationTimeout, 0), DefaultOperationTimeout)
	opts.ClaimGrace = cmp.Or(opts.ClaimGrace, DefaultClaimGrace)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	claims, own := opts.Claims, false
	if claims == nil {
		var err error
		if claims, err = lease.New(ClaimBudget, lease.Options{}); err != nil {
			return nil, err
		}
		own = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Controller{
		store: store, rt: rt, opts: opts, log: opts.Logger, claims: claims, ownClaims: own,
		pending: map[string]ttl.Expiry{}, active: map[string]bool{}, signal: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel,
	}
	for range opts.Workers {
		c.wg.Add(1)
		go c.worker()
	}
	if opts.Interval > 0 {
		c.wg.Add(1)
		go c.loop()
	}
	return c, nil
}

func (c *Controller) loop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		if _, err := c.ReconcileAll(c.ctx); err != nil && c.ctx.Err() == nil {
			c.log.Warn("controller: full reconcile failed", "err", err)
		}
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Wake queues the workspaces of the runner's decisions (ttl.Runner's Wake,
// or a pgnotify.ListenExpired callback); an Expiry with only an ID is a bare
// request to look at the workspace. nil means "reconcile everything" (a
// listener that reconnected). It never blocks.
func (c *Controller) Wake(_ context.Context, exps []ttl.Expiry) error {
	if exps == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return nil
		}
		c.wg.Add(1)
		go func() { // not on the caller's goroutine: a listener must keep listening
			defer c.wg.Done()
			if _, err := c.ReconcileAll(c.ctx); err != nil && c.ctx.Err() == nil {
				c.log.Warn("controller: full reconcile failed", "err", err)
			}
		}()
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	for _, x := range exps {
		c.woken.Add(1)
		c.enqueueLocked(x)
	}
	return nil
}

// WakeIDs queues the workspaces ids (a catalog.Waker).
func (c *Controller) WakeIDs(ctx context.Context, ids []string) error {
	exps := make([]ttl.Expiry, len(ids))
	for i, id := range ids {
		exps[i] = ttl.Expiry{ID: id}
	}
	return c.Wake(ctx, exps)
}

func (c *Controller) enqueueLocked(x ttl.Expiry) {
	old, queued := c.pending[x.ID]
	if queued && old.Rule != "" && x.Rule == "" {
		x = old // keep the decision; a bare wake adds nothing
	}
	c.pending[x.ID] = x
	if !queued {
		c.order = append(c.order, x.ID)
	}
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// next takes the first queued workspace no worker is operating on.
func (c *Controller) next() (ttl.Expiry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range c.order {
		if c.active[id] {
			continue
		}
		x := c.pending[id]
		delete(c.pending, id)
		c.order = append(c.order[:i], c.order[i+1:]...)
		c.active[id] = true
		if len(c.order) > 0 {
			select { // another worker may take the next one
			case c.signal <- struct{}{}:
			default:
			}
		}
		return x, true
	}
	return ttl.Expiry{}, false
}

func (c *Controller) worker() {
	defer c.wg.Done()
	for {
		x, ok := c.next()
		if !ok {
			select {
			case <-c.ctx.Done():
				return
			case <-c.signal:
				continue
			}
		}
		var decision *ttl.Expiry
		if x.Rule != "" {
			decision = &x
		}
		if err := c.Reconcile(context.WithoutCancel(c.ctx), x.ID, decision); err != nil {
			c.log.Warn("controller: reconcile failed", "workspace", x.ID, "err", err)
		}
		c.mu.Lock()
		delete(c.active, x.ID)
		if _, again := c.pending[x.ID]; again {
			select {
			case c.signal <- struct{}{}:
			default:
			}
		}
		c.mu.Unlock()
		if c.ctx.Err() != nil {
			return
		}
	}
}

// ReconcileAll queues every workspace whose desired state is set, deleted
// ones included, and restarts the RUNNING ones whose server is gone. It
// returns how many it queued.
func (c *Controller) ReconcileAll(ctx context.Context) (int, error) {
	c.reconciles.Add(1)
	n := 0
	for _, f := range []entities.Filter{{HasDesiredState: true, Deleted: true}, {Phase: catalog.Running}} {
		for after := ""; ; {
			f.After, f.Limit = after, entities.ListLimit
			es, err := c.store.List(ctx, f)
			if err != nil {
				c.errs.Add(1)
				return n, fmt.Errorf("controller: list workspaces: %w", err)
			}
			for _, e := range es {
				if f.Phase == catalog.Running && (e.DesiredState != "" || e.Operation != "" || c.rt.Alive(ctx, e.ID)) {
					continue
				}
				c.mu.Lock()
				if !c.closed {
					c.enqueueLocked(ttl.Expiry{ID: e.ID})
					n++
				}
				c.mu.Unlock()
			}
			if len(es) < entities.ListLimit {
				break
			}
			after = es[len(es)-1].ID
		}
	}
	return n, nil
}

// maxSteps bounds the operations one Reconcile runs (RUNNING → STANDBY →
// ARCHIVED is two).
const maxSteps = 4

// Reconcile brings one workspace to its desired state, one operation after
// the other, reading the row again after each; x, if not nil, is the
// runner's decision that woke it. A workspace with an operation in
// progress is left to the controller running it.
func (c *Controller) Reconcile(ctx context.Context, id string, x *ttl.Expiry) error {
	for range maxSteps {
		e, err := c.store.Get(ctx, id)
		if errors.Is(err, entities.ErrNotFound) {
			return nil
		}
		if err != nil {
			c.errs.Add(1)
			return err
		}
		done, err := c.step(ctx, e, x)
		if err != nil || done {
			return err
		}
		x = nil // the decision is acted on, or stale
	}
	return nil
}

// step runs at most one operation on e and reports whether e needs
// nothing more.
func (c *Controller) step(ctx context.Context, e entities.Entity, x *ttl.Expiry) (bool, error) {
	if e.Operation != "" {
		return c.takeOver(ctx, e)
	}
	switch want := e.DesiredState; {
	case want == "":
		if e.Phase == catalog.Running && e.DeletedAt.IsZero() && !c.rt.Alive(ctx, e.ID) {
			return false, c.start(ctx, e) // its server died
		}
		return true, nil
	case want == catalog.Running && !e.DeletedAt.IsZero():
		return false, c.clear(ctx, e)
	case want == catalog.Running:
		if e.Phase == catalog.Running && c.rt.Alive(ctx, e.ID) {
			return false, c.clear(ctx, e)
		}
		return false, c.start(ctx, e)
	case want == catalog.Standby:
		if e.Phase != catalog.Running {
			return false, c.clear(ctx, e)
		}
		return false, c.stop(ctx, e, x)
	case want == catalog.Archived:
		switch e.Phase {
		case catalog.Archived:
			return false, c.clear(ctx, e)
		case catalog.Running:
			return false, c.stop(ctx, e, nil)
		}
		return false, c.archive(ctx, e)
	default:
		c.log.Warn("controller: unknown desired state; clearing it", "workspace", e.ID, "desired_state", want)
		return false, c.clear(ctx, e)
	}
}

// clear removes a desired state that needs nothing done (or that a newer
// one replaced), if it is still the one read.
func (c *Controller) clear(ctx context.Context, e entities.Entity) error {
	_, err := c.store.Update(ctx, e.ID, entities.Update{ExpectDesiredState: e.DesiredState, ClearDesiredState: true})
	return c.settle(err)
}

// settle turns a lost compare-and-set into success: the next round reads
// the row again.
func (c *Controller) settle(err error) error {
	if errors.Is(err, entities.ErrConflict) {
		c.conflicts.Add(1)
		return nil
	}
	if err != nil {
		c.errs.Add(1)
	}
	return err
}

// ClaimBudget is the budget of the Manager a Controller makes when
// Options.Claims is nil: more operations than one controller runs.
const ClaimBudget = 1 << 20

// claimed is an operation this controller holds: its lease, kept alive
// until the operation ends.
type claimed struct {
	op string
	ka *claim.Claim
}

// lease claims workspace id's operation as a lease. It returns nil, nil if
// another controller holds it (or the budget is spent): it is not this
// one's to run now.
func (c *Controller) lease(ctx context.Context, id string) (*claim.Claim, error) {
	ka, err := claim.Take(ctx, c.claims, id, c.opts.Name, c.opts.OperationTimeout+time.Minute, c.opts.ClaimGrace)
	switch {
	case err != nil:
		c.errs.Add(1)
		return nil, fmt.Errorf("controller: %w", err)
	case ka == nil:
		c.conflicts.Add(1)
	}
	return ka, nil
}

// unclaim releases a claim; a lost release is harmless (the lease
// lapses after its grace, and the row no longer shows the operation).
func (c *Controller) unclaim(ctx context.Context, ka *claim.Claim) {
	if err := ka.Release(ctx); err != nil {
		c.log.Debug("controller: releasing a claim failed; it lapses", "err", err)
	}
}

// claim takes the workspace's lease, then sets operation op on e where
// there was none and the row is as read. It returns the claim, or nil if
// another writer or controller came first.
func (c *Controller) claim(ctx context.Context, e entities.Entity, op string, expectLast time.Time) (*claimed, error) {
	ka, err := c.lease(ctx, e.ID)
	if ka == nil {
		return nil, err
	}
	_, err = c.store.Update(ctx, e.ID, entities.Update{
		ExpectOperation: "", ExpectPhase: e.Phase, ExpectDesiredState: e.DesiredState,
		ExpectLastActivityAt: expectLast, Operation: op,
	})
	if err != nil {
		c.unclaim(ctx, ka)
		return nil, c.settle(err)
	}
	return &claimed{op: op, ka: ka}, nil
}

// takeOver handles a workspace whose row shows an operation in progress.
// If another controller holds its claim, the workspace is left to it. If
// nobody does, the controller that set it died: this one takes the claim
// and runs the operation again from its start.
func (c *Controller) takeOver(ctx context.Context, e entities.Entity) (bool, error) {
	ka, err := c.lease(ctx, e.ID)
	if ka == nil {
		return true, err
	}
	// Read again under the claim: the operation may have ended between
	// the read and the grant.
	if e, err = c.store.Get(ctx, e.ID); err != nil || e.Operation == "" {
		c.unclaim(ctx, ka)
		if errors.Is(err, entities.ErrNotFound) {
			return true, nil
		}
		return false, c.settle(err)
	}
	c.takenOver.Add(1)
	c.log.Warn("controller: taking over an operation whose controller is gone", "workspace", e.ID, "operation", e.Operation, "phase", e.Phase)
	cl := &claimed{op: e.Operation, ka: ka}
	switch e.Operation {
	case catalog.OpStarting:
		return false, c.runStart(ctx, e, cl)
	case catalog.OpStopping:
		return false, c.runStop(ctx, e, cl)
	case catalog.OpArchiving:
		return false, c.runArchive(ctx, e, cl)
	}
	c.log.Warn("controller: unknown operation; clearing it", "workspace", e.ID, "operation", e.Operation)
	return false, c.finish(ctx, e.ID, cl, "", "", nil)
}

// finish ends the claimed operation with phase, clearing the desired
// state if it is still done (else a newer wish waits for the next round),
// and releases the claim. If the operation failed, the phase is left as
// it was. If the claim was lost meanwhile, the row is left to the
// controller that may have taken it over.
func (c *Controller) finish(ctx context.Context, id string, cl *claimed, phase, done string, opErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := cl.ka.Err(); err != nil {
		c.abandoned.Add(1)
		c.errs.Add(1)
		c.log.Warn("controller: lost the claim on an operation; leaving it to whoever took it", "workspace", id, "operation", cl.op, "err", err)
		return errors.Join(opErr, fmt.Errorf("controller: claim on %s lost: %w", id, err))
	}
	defer c.unclaim(ctx, cl.ka)
	op := cl.op
	if opErr != nil {
		c.errs.Add(1)
		_, err := c.store.Update(ctx, id, entities.Update{ExpectOperation: op, Operation: ""})
		return errors.Join(opErr, err)
	}
	if done == "" { // an operation nobody knows: end it, change nothing else
		_, err := c.store.Update(ctx, id, entities.Update{ExpectOperation: op, Operation: ""})
		return c.settle(err)
	}
	_, err := c.store.Update(ctx, id, entities.Update{ExpectOperation: op, ExpectDesiredState: done, Operation: "", Phase: phase, ClearDesiredState: true})
	if errors.Is(err, entities.ErrConflict) {
		_, err = c.store.Update(ctx, id, entities.Update{ExpectOperation: op, Operation: "", Phase: phase})
	}
	if err != nil {
		c.errs.Add(1)
	}
	return err
}

// opContext bounds one operation; it ignores the caller's cancellation, so
// that a controller shutting down finishes what it started, but ends when
// the claim is lost.
func (c *Controller) opContext(ctx context.Context, cl *claimed) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.OperationTimeout)
	go func() {
		select {
		case <-cl.ka.Done():
			cancel()
		case <-octx.Done():
		}
	}()
	return octx, cancel
}

func (c *Controller) start(ctx context.Context, e entities.Entity) error {
	cl, err := c.claim(ctx, e, catalog.OpStarting, time.Time{})
	if cl == nil {
		return err
	}
	return c.runStart(ctx, e, cl)
}

func (c *Controller) runStart(ctx context.Context, e entities.Entity, cl *claimed) error {
	c.busy.Add(1)
	defer c.busy.Add(-1)
	octx, cancel := c.opContext(ctx, cl)
	defer cancel()
	var err error
	if e.Phase == catalog.Archived {
		if err = c.rt.Restore(octx, e.ID); err == nil {
			c.restored.Add(1)
		}
	}
	if err == nil {
		err = c.rt.Start(octx, e.ID)
	}
	if err == nil {
		c.started.Add(1)
		c.log.Info("workspace started", "workspace", e.ID, "from", e.Phase)
	}
	return c.finish(ctx, e.ID, cl, catalog.Running, catalog.Running, err)
}

// stop stops a RUNNING workspace for a STANDBY decision (or on the way to
// ARCHIVED). For a decision it first checks that no activity arrived since
// it was made (x's LastActivityAt, or, found by a full reconcile, within
// the standby TTL): if some did, it clears the decision and the workspace
// stays RUNNING. The claim itself compares last_access_at too, so
// activity merged between the check and the claim also keeps it.
func (c *Controller) stop(ctx context.Context, e entities.Entity, x *ttl.Expiry) error {
	expectLast := e.LastActivityAt
	if e.DesiredState == catalog.Standby && e.DeletedAt.IsZero() {
		active := time.Since(e.LastActivityAt) <= c.opts.Standby
		if x != nil && x.Then == catalog.Standby && !x.LastActivityAt.IsZero() {
			active = e.LastActivityAt.After(x.LastActivityAt)
			expectLast = x.LastActivityAt
		}
		if active {
			c.kept.Add(1)
			c.log.Info("workspace active since the standby decision; kept running", "workspace", e.ID, "last_access_at", e.LastActivityAt)
			return c.clear(ctx, e)
		}
	}
	cl, err := c.claim(ctx, e, catalog.OpStopping, expectLast)
	if cl == nil {
		return err
	}
	return c.runStop(ctx, e, cl)
}

func (c *Controller) runStop(ctx context.Context, e entities.Entity, cl *claimed) error {
	c.busy.Add(1)
	defer c.busy.Add(-1)
	octx, cancel := c.opContext(ctx, cl)
	defer cancel()
	err := c.rt.Stop(octx, e.ID)
	if err == nil {
		c.stopped.Add(1)
		c.log.Info("workspace stopped", "workspace", e.ID, "last_access_at", e.LastActivityAt)
	}
	return c.finish(ctx, e.ID, cl, catalog.Standby, catalog.Standby, err)
}

func (c *Controller) archive(ctx context.Context, e entities.Entity) error {
	cl, err := c.claim(ctx, e, catalog.OpArchiving, time.Time{})
	if cl == nil {
		return err
	}
	return c.runArchive(ctx, e, cl)
}

func (c *Controller) runArchive(ctx context.Context, e entities.Entity, cl *claimed) error {
	c.busy.Add(1)
	defer c.busy.Add(-1)
	octx, cancel := c.opContext(ctx, cl)
	defer cancel()
	err := c.rt.Archive(octx, e.ID)
	if err == nil {
		c.archived.Add(1)
		c.log.Info("workspace archived", "workspace", e.ID)
	}
	return c.finish(ctx, e.ID, cl, catalog.Archived, catalog.Archived, err)
}

// Stats returns a snapshot of the controller's counters.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	queued := len(c.order)
	c.mu.Unlock()
	return Stats{
		Started: c.started.Load(), Stopped: c.stopped.Load(), Archived: c.archived.Load(), Restored: c.restored.Load(),
		Kept: c.kept.Load(), Conflicts: c.conflicts.Load(), Errors: c.errs.Load(),
		TakenOver: c.takenOver.Load(), Abandoned: c.abandoned.Load(),
		Reconciles: c.reconciles.Load(), Woken: c.woken.Load(),
		Busy: int(c.busy.Load()), Queued: queued,
	}
}

// Close stops taking work, lets the operations in progress finish and
// waits for them until ctx ends. Queued workspaces are left to the next
// controller's full reconcile.
func (c *Controller) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("controller: %d operations still running: %w", c.busy.Load(), context.Cause(ctx))
	}
	if c.ownClaims {
		return c.claims.Close(ctx)
	}
	return nil
}
