package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/archive"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/ttl"
)

// DrainingError is ErrDraining with the sandbox it is about.
type DrainingError struct {
	Conversation string
	SandboxID    string
}

func (e *DrainingError) Error() string {
	return fmt.Sprintf("conversation %s: its sandbox %s is being destroyed (draining); retry shortly: a new sandbox gets the conversation's files",
		e.Conversation, short(e.SandboxID))
}

// Unwrap makes it match ErrDraining.
func (e *DrainingError) Unwrap() error { return ErrDraining }

// begin starts a request of up to dur on conv's sandbox, assigning one
// first when the conversation has none (and create is set, or its files
// are archived). It returns the record and the function that ends the
// request, which the caller must call. The request's in-flight entry lasts
// a grace longer than dur, which only matters if this instance dies
// mid-request.
func (b *Backend) begin(ctx context.Context, conv string, dur time.Duration, create bool) (Record, func(), error) {
	if err := CheckConversation(conv); err != nil {
		return Record{}, nil, err
	}
	if b.closed.Load() {
		return Record{}, nil, ErrClosed
	}
	token := newToken()
	deadline := time.Now().Add(b.cfg.AssignTimeout)
	for {
		rec, err := b.cfg.Assignments.Begin(ctx, conv, token, dur+b.cfg.Grace)
		switch {
		case err == nil:
			id := entityID(conv, rec.Sandbox.ID)
			b.activity(ctx, id)
			done := func() {
				ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				if err := b.cfg.Assignments.End(ectx, conv, token, b.recordTTL()); err != nil {
					b.log.Warn("ending a request failed", "conversation", conv, "err", err)
				}
				b.activity(ectx, id)
			}
			return rec, done, nil
		case errors.Is(err, errDraining):
			b.m.refused()
			return rec, nil, &DrainingError{Conversation: conv, SandboxID: rec.Sandbox.ID}
		case !errors.Is(err, errNoRecord):
			return Record{}, nil, err
		}
		if !create {
			if ok, err := b.known(ctx, conv); err != nil {
				return Record{}, nil, err
			} else if !ok {
				return Record{}, nil, fmt.Errorf("%w %s: it has no sandbox and no archived files", ErrNotFound, conv)
			}
		}
		err = b.assign(ctx, conv)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrBusy) {
			return Record{}, nil, err
		}
		if time.Now().After(deadline) {
			return Record{}, nil, fmt.Errorf("conversation %s: %w for longer than %v", conv, ErrBusy, b.cfg.AssignTimeout)
		}
		select {
		case <-ctx.Done():
			return Record{}, nil, context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// activity merges "now" into the sandbox's entity: the inactivity TTL
// counts from the last request's completion, and a request's start keeps
// a busy sandbox from being taken for an idle one.
func (b *Backend) activity(ctx context.Context, id string) {
	if err := b.cfg.Entities.Add(ctx, []ttl.Activity{{ID: id, At: time.Now()}}); err != nil {
		b.log.Warn("recording activity failed", "entity", id, "err", err)
	}
}

// known reports whether conv, which has no record, has archived files or
// a live sandbox the shared state lost.
func (b *Backend) known(ctx context.Context, conv string) (bool, error) {
	if ok, err := b.archived(ctx, conv); err != nil || ok {
		return ok, err
	}
	found, err := b.owners(ctx, nil)
	if err != nil {
		return false, err
	}
	for _, o := range found {
		if o.conv == conv {
			return true, nil
		}
	}
	return false, nil
}

func (b *Backend) archived(ctx context.Context, conv string) (bool, error) {
	r, err := b.cfg.Archive.Get(ctx, conv)
	if errors.Is(err, archive.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_ = r.Close()
	return true, nil
}

// assign gives conv a sandbox, holding the conversation's claim (claim.go):
// the live one of conv that the shared state lost, if any (adopt), else a
// warm one from the pool (or a new one), recorded as the conversation's
// (a ttl entity, so that no pool instance takes it for an orphan) before
// it leaves the pool, made the conversation's (its agent's owner), with
// the conversation's archived files restored, then published in the
// assignment record. It returns ErrBusy when
// another instance is assigning the conversation, or when an earlier
// sandbox of it is still being destroyed (a DrainingError).
//
// The work runs under its own context bounded by AssignTimeout: a client
// that gives up does not leave half an assignment behind.
func (b *Backend) assign(rctx context.Context, conv string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), b.cfg.AssignTimeout)
	defer cancel()
	release, err := b.claimConversation(ctx, conv)
	if err != nil {
		return err
	}
	if release == nil {
		return ErrBusy
	}
	defer release()
	if _, ok, err := b.cfg.Assignments.Get(ctx, conv); err != nil || ok {
		return err // assigned meanwhile
	}
	if err := b.clearEarlier(ctx, conv); err != nil {
		return err
	}
	// A sandbox of conv that the shared state lost (adopt.go) serves it
	// again, files and all.
	if ok, err := b.adopt(ctx, conv); err != nil || ok {
		return err
	}

	start := time.Now()
	h, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("conversation %s: no sandbox: %w", conv, err)
	}
	sb := h.Value()
	warm := sb.Created.Before(start)
	id := entityID(conv, sb.ID)
	now := time.Now()
	if _, err := b.cfg.Entities.Create(ctx, entities.Entity{
		ID: id, Phase: PhaseAssigning, CreatedAt: sb.Created, LastActivityAt: now, PhaseChangedAt: now,
	}); err != nil {
		h.Release() // untouched: back to the warm pool
		return fmt.Errorf("conversation %s: recording the assignment: %w", conv, err)
	}
	// The sandbox is conv's from now on, whatever the shared state loses.
	restored, err := false, b.agent(sb).SetOwner(ctx, conv)
	if err == nil {
		b.ownerOf.set(sb.ID, conv)
		restored, err = b.restore(ctx, conv, sb)
	}
	if err != nil {
		// Half restored: neither the conversation's nor fit for another.
		sbv := h.Detach()
		b.destroyLater(conv, sbv.ID, ReasonAssignLate)
		return fmt.Errorf("conversation %s: restoring its files: %w", conv, err)
	}
	if _, err := b.cfg.Entities.Update(ctx, id, entities.Update{ExpectPhase: PhaseAssigning, Phase: PhaseRunning}); err != nil {
		// Taken for a stuck assignment: whoever claimed it destroys it.
		h.Detach()
		return fmt.Errorf("conversation %s: %w (%v)", conv, ErrBusy, err)
	}
	created, _, err := b.cfg.Assignments.Create(ctx, Record{Conversation: conv, Sandbox: sb}, b.recordTTL())
	h.Detach()
	if err != nil || !created {
		b.destroyLater(conv, sb.ID, ReasonSuperseded)
		return err // nil: another instance's assignment serves the request
	}
	b.m.assignedOne(warm, time.Since(start))
	b.log.Info("sandbox assigned", "conversation", conv, "sandbox", short(sb.ID), "addr", sb.Addr(),
		"warm", warm, "restored_files", restored, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// clearEarlier deals with the live sandboxes conv still has although it
// has no record, before a new one is assigned: one being destroyed makes
// the caller wait (DrainingError); one whose record expired before the GC
// got to it (every GC pass failed for that long) is destroyed now, its
// files archived; one whose assignment was abandoned is destroyed; one
// being assigned by an instance whose claim lapsed means ErrBusy.
func (b *Backend) clearEarlier(ctx context.Context, conv string) error {
	ents, err := b.conversationEntities(ctx, conv)
	if err != nil {
		return err
	}
	for _, e := range ents {
		_, sbID, _ := splitID(e.ID)
		switch {
		case e.Operation != "":
			b.m.refused()
			return &DrainingError{Conversation: conv, SandboxID: sbID}
		case e.Phase == PhaseRunning:
			if err := b.destroy(ctx, conv, sbID, ReasonStale, time.Time{}); err != nil {
				return err
			}
		case e.Phase == PhaseAssigning && time.Since(e.PhaseChangedAt) > b.cfg.AssignTimeout:
			if err := b.destroy(ctx, conv, sbID, ReasonAssignLate, time.Time{}); err != nil {
				return err
			}
		default:
			return ErrBusy
		}
	}
	return nil
}

// restore extracts conv's archive, if it has one, into sb.
func (b *Backend) restore(ctx context.Context, conv string, sb sandbox.Sandbox) (bool, error) {
	r, err := b.cfg.Archive.Get(ctx, conv)
	if errors.Is(err, archive.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer r.Close()
	if err := b.agent(sb).Import(ctx, r); err != nil {
		b.m.restoredOne(false)
		return false, err
	}
	b.m.restoredOne(true)
	return true, nil
}
