package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/ttl"
)

// The GC. Every instance runs the same loops on the shared state:
//
//   - the ttl.Runner applies the rules (inactivity, lifetime, abandoned
//     assignment) every GC interval; the store hands each expired sandbox
//     to exactly one instance's wake, which destroys it;
//   - Reconcile, every GC interval, destroys what was decided but not
//     done (the instance that should have done it died);
//   - CheckHealth, every health interval, destroys assigned sandboxes
//     that stopped answering.
//
// A destroy starts with a claim (claim.go), then marks the entity: its
// Operation set, by compare-and-set, to "destroy:<instance>", so that the
// rules leave it alone and Reconcile finds a destroy that an instance
// began and did not finish.

// destroyOp is the Operation of an entity this instance is destroying.
func (b *Backend) destroyOp() string { return "destroy:" + b.cfg.Instance }

// wake is the runner's Wake: it destroys the sandboxes the rules expired,
// in the background.
func (b *Backend) wake(_ context.Context, exps []ttl.Expiry) error {
	for _, e := range exps {
		conv, sbID, ok := splitID(e.ID)
		if !ok {
			continue
		}
		var expect time.Time
		if e.Rule == ReasonInactive {
			expect = e.LastActivityAt // a request since calls it off
		}
		b.log.Info("sandbox expired", "conversation", conv, "sandbox", short(sbID), "rule", e.Rule)
		b.spawn(conv, sbID, e.Rule, expect)
	}
	return nil
}

// destroyLater destroys conv's sandbox sbID in the background.
func (b *Backend) destroyLater(conv, sbID, reason string) { b.spawn(conv, sbID, reason, time.Time{}) }

func (b *Backend) spawn(conv, sbID, reason string, expect time.Time) {
	b.wg.Go(func() {
		select {
		case b.sem <- struct{}{}:
		case <-b.ctx.Done():
			return // the claim, if any, expires; another instance finishes
		}
		defer func() { <-b.sem }()
		if err := b.destroy(b.ctx, conv, sbID, reason, expect); err != nil && b.ctx.Err() == nil {
			b.log.Warn("destroy failed", "conversation", conv, "sandbox", short(sbID), "reason", reason, "err", err)
		}
	})
}

// archives reports whether a destroy for reason keeps the sandbox's files.
func archives(reason string) bool {
	switch reason {
	case ReasonDeleted, ReasonSuperseded, ReasonAssignLate:
		return false
	}
	return true
}

// destroy destroys conv's sandbox sbID gracefully, in the design's order:
// claim it, mark it draining (new requests are refused), wait up to the
// grace for the requests in flight, sync its files to the archive, stop
// and remove it, delete its metadata. It does nothing if another instance
// holds a live claim on it or it is gone. For ReasonInactive, expect is
// the activity the decision saw: a request since (or one in flight) calls
// the destroy off. Every step can be repeated: an instance that takes over
// an expired claim finishes the job.
func (b *Backend) destroy(ctx context.Context, conv, sbID, reason string, expect time.Time) error {
	id := entityID(conv, sbID)
	e, op, unclaim, err := b.claim(ctx, id, expect)
	if err != nil || unclaim == nil {
		return err
	}
	defer unclaim()
	release := func() {
		_, err := b.cfg.Entities.Update(context.WithoutCancel(ctx), id, entities.Update{ExpectOperation: op, Operation: "", ClearDesiredState: true})
		if err != nil {
			b.log.Warn("releasing a destroy claim failed", "conversation", conv, "sandbox", short(sbID), "err", err)
		}
	}
	start := time.Now()

	// 1. Draining: new requests are refused from now on.
	rec, named, err := b.cfg.Assignments.Drain(ctx, conv, sbID)
	if err != nil {
		return err // the claim expires; another pass retries
	}
	sb := rec.Sandbox
	if !named {
		if sb, err = b.find(ctx, sbID); err != nil {
			return err
		}
	}
	if named && reason == ReasonInactive && rec.InFlight > 0 {
		// Busy after all: a request began between the decision and the
		// drain. Call it off; the rule fires again after the next quiet
		// hour.
		if err := b.cfg.Assignments.Undrain(ctx, conv, sbID); err != nil {
			return err
		}
		release()
		b.log.Info("destroy called off: a request is in flight", "conversation", conv, "sandbox", short(sbID))
		return nil
	}

	// 2. The requests in flight get up to the grace to finish.
	if named {
		deadline := time.Now().Add(b.cfg.Grace)
		for rec.InFlight > 0 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(100 * time.Millisecond):
			}
			var ok bool
			if rec, ok, err = b.cfg.Assignments.Get(ctx, conv); err != nil || !ok {
				break
			}
		}
	}

	// 3. The files go to the archive (unless the sandbox never served).
	archived := int64(-1)
	if archives(reason) && e.Phase == PhaseRunning && sb.Host != "" {
		archived = b.sync(ctx, conv, sb)
	}

	// 4, 5. Stop and remove.
	dctx, cancel := context.WithTimeout(ctx, b.cfg.Grace+30*time.Second)
	err = b.cfg.Provisioner.Destroy(dctx, sb)
	cancel()
	if err != nil {
		b.m.destroyFailed()
		return fmt.Errorf("destroy sandbox %s: %w", short(sbID), err)
	}

	// 6. The metadata: the record, then the entity.
	if err := b.cfg.Assignments.Delete(ctx, conv, sbID); err != nil {
		return err
	}
	if _, err := b.cfg.Entities.Update(ctx, id, entities.Update{
		ExpectOperation: op, Operation: "", Phase: PhaseDestroyed, Delete: true,
	}); err != nil {
		return fmt.Errorf("forget sandbox %s: %w", short(sbID), err)
	}
	b.purge(ctx, []string{id})
	b.m.destroyedOne(reason)
	b.log.Info("sandbox destroyed", "conversation", conv, "sandbox", short(sbID), "reason", reason,
		"archived_bytes", archived, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// purge removes the records of destroyed sandboxes: deletion keeps them
// otherwise. A failure is logged; the next Reconcile retries.
func (b *Backend) purge(ctx context.Context, ids []string) {
	if len(ids) == 0 {
		return
	}
	if _, err := b.cfg.Entities.Purge(ctx, ids); err != nil {
		b.log.Warn("purging destroyed sandboxes' records failed", "count", len(ids), "err", err)
	}
}

// claim takes the entity id for a destroy: its claim, then its Operation
// and desired state. unclaim is nil when it is gone, deleted, claimed by
// another instance, or (with expect set) has seen activity after expect,
// in which case its decision is cleared so that the rule can fire again
// later. An Operation left by an instance whose claim lapsed is taken
// over.
func (b *Backend) claim(ctx context.Context, id string, expect time.Time) (e entities.Entity, op string, unclaim func(), err error) {
	e, err = b.cfg.Entities.Get(ctx, id)
	if errors.Is(err, entities.ErrNotFound) {
		return e, "", nil, nil
	}
	if err != nil || !e.DeletedAt.IsZero() {
		return e, "", nil, err
	}
	release, err := b.claimDestroy(ctx, id)
	if err != nil || release == nil {
		return e, "", nil, err
	}
	defer func() {
		if unclaim == nil {
			release()
		}
	}()
	op = b.destroyOp()
	u := entities.Update{ExpectOperation: e.Operation, Operation: op, DesiredState: desiredDestroy, ExpectLastActivityAt: expect}
	got, err := b.cfg.Entities.Update(ctx, id, u)
	if errors.Is(err, entities.ErrNotFound) {
		return e, "", nil, nil // destroyed and purged meanwhile
	}
	if errors.Is(err, entities.ErrConflict) {
		if !expect.IsZero() {
			// Activity since the decision: undo the decision (the
			// claim keeps every other destroy out meanwhile).
			_, _ = b.cfg.Entities.Update(ctx, id, entities.Update{ClearDesiredState: true})
		}
		return e, "", nil, nil
	}
	if err != nil {
		return e, "", nil, err
	}
	if e.Operation != "" {
		b.log.Warn("took over a destroy whose instance's claim lapsed", "entity", id, "operation", e.Operation)
	}
	return got, op, release, nil
}

// find returns the sandbox sbID as the provisioner lists it (with its
// address, if the provisioner can resolve it), for a destroy without an
// assignment record; a sandbox that is gone is returned with its ID only
// (Destroy treats it as done).
func (b *Backend) find(ctx context.Context, sbID string) (sandbox.Sandbox, error) {
	listed, err := b.cfg.Provisioner.List(ctx)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	for _, l := range listed {
		if l.ID != sbID {
			continue
		}
		sb := l.Value
		if r, ok := b.cfg.Provisioner.(interface {
			Resolve(context.Context, sandbox.Sandbox) (sandbox.Sandbox, error)
		}); ok && sb.Host == "" {
			if resolved, err := r.Resolve(ctx, sb); err == nil {
				sb = resolved // its files can be archived
			}
		}
		return sb, nil
	}
	return sandbox.Sandbox{ID: sbID}, nil
}

// sync writes sb's files to conv's archive and returns the bytes written,
// or -1 when the sandbox could not export them (the previous archive, if
// any, stays).
func (b *Backend) sync(ctx context.Context, conv string, sb sandbox.Sandbox) int64 {
	// A sandbox that does not answer at once (frozen, dead) would hold the
	// export for its whole bound.
	hctx, cancel := context.WithTimeout(ctx, b.cfg.HealthTimeout)
	err := b.agent(sb).Health(hctx)
	cancel()
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var r io.ReadCloser
	if err == nil {
		r, err = b.agent(sb).Export(actx)
	}
	if err == nil {
		var n int64
		n, err = b.cfg.Archive.Put(actx, conv, r)
		_ = r.Close()
		if err == nil {
			b.m.archivedOne(true, n)
			return n
		}
	}
	b.m.archivedOne(false, 0)
	b.log.Warn("archiving the sandbox's files failed; the previous archive stays", "conversation", conv, "sandbox", short(sb.ID), "err", err)
	return -1
}

// Reconcile destroys the sandboxes whose destroy was decided and not done:
// never claimed (a wake lost with its instance), or claimed by an instance
// that did not finish in time. A sandbox is taken only when the previous
// pass found it waiting too: the instance whose wake got it has had a GC
// interval to claim it. Calls run one after the other.
func (b *Backend) Reconcile(ctx context.Context) error {
	b.waitMu.Lock()
	defer b.waitMu.Unlock()
	ents, err := b.entities(ctx, entities.Filter{DesiredState: desiredDestroy})
	if err != nil {
		return err
	}
	waiting := map[string]bool{}
	for _, e := range ents {
		// One claimed by a live instance is tried too: its claim
		// refuses the destroy, which then does nothing.
		waiting[e.ID+"\x00"+e.Operation] = true
		conv, sbID, ok := splitID(e.ID)
		if ok && b.waiting[e.ID+"\x00"+e.Operation] {
			b.spawn(conv, sbID, ReasonRecovered, time.Time{})
		}
	}
	b.waiting = waiting

	// The records of destroyed sandboxes whose destroyer died before it
	// purged them.
	all, err := b.entities(ctx, entities.Filter{Deleted: true})
	if err != nil {
		return err
	}
	var gone []string
	for _, e := range all {
		if !e.DeletedAt.IsZero() {
			gone = append(gone, e.ID)
		}
	}
	b.purge(ctx, gone)
	if s, ok := b.cfg.Provisioner.(interface {
		SweepDirs(context.Context, time.Duration) (int, error)
	}); ok {
		if n, err := s.SweepDirs(ctx, 10*time.Minute); err != nil {
			return err
		} else if n > 0 {
			b.log.Info("removed work directories of dead sandboxes", "count", n)
		}
	}
	return nil
}

// CheckHealth checks every assigned sandbox that is serving (RUNNING, not
// being destroyed) and destroys those that fail twice in a row, a second
// apart. Every instance runs it; the destroy's claim makes it happen once.
func (b *Backend) CheckHealth(ctx context.Context) error {
	ents, err := b.entities(ctx, entities.Filter{Phase: PhaseRunning})
	if err != nil {
		return err
	}
	b.assigned.Store(int64(len(ents)))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, e := range ents {
		if e.Operation != "" || e.DesiredState != "" {
			continue
		}
		conv, sbID, ok := splitID(e.ID)
		if !ok {
			continue
		}
		rec, ok, err := b.cfg.Assignments.Get(ctx, conv)
		if err != nil {
			return err
		}
		if !ok || rec.Sandbox.ID != sbID || rec.Status == StatusDraining {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := b.check(ctx, rec.Sandbox)
			if err == nil {
				b.m.checked(true)
				return
			}
			b.m.checked(false)
			b.log.Warn("sandbox failed its health check; replacing it", "conversation", conv, "sandbox", short(sbID), "err", err)
			b.spawn(conv, sbID, ReasonUnhealthy, time.Time{})
		})
	}
	wg.Wait()
	return nil
}

// check runs the provisioner's health check, and once more a second later
// if it fails: one lost probe is not a dead sandbox.
func (b *Backend) check(ctx context.Context, sb sandbox.Sandbox) error {
	cctx, cancel := context.WithTimeout(ctx, 2*b.cfg.HealthTimeout)
	err := b.cfg.Provisioner.Check(cctx, sb)
	cancel()
	if err == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Second):
	}
	cctx, cancel = context.WithTimeout(ctx, 2*b.cfg.HealthTimeout)
	defer cancel()
	return b.cfg.Provisioner.Check(cctx, sb)
}
