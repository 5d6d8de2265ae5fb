package pool

import (
	"context"
	"errors"
	"fmt"
	"github.com/ttlkit/ttlkit/pool/shared"
	"time"
)

// This file is the record protocol of a shared Inventory (sharedSet): how
// items are encoded into records, and how a record is added, put back and
// resolved when the Inventory fails and a call may or may not have gone
// through.

// heldTTL is the ttl of this instance's in-use records: prune refreshes them
// every janitor pass, so three missed passes mean the instance is gone.
func (p *Pool[T]) heldTTL() time.Duration {
	iv := p.opts.JanitorInterval
	if iv <= 0 {
		iv = defaultJanitorInterval
	}
	return 3 * iv
}

// idleTTL is the ttl of idle records: none, the janitors prune them, unless
// the item's lifetime ends first.
func (p *Pool[T]) idleTTL() time.Duration { return p.opts.MaxLifetime }

func (p *Pool[T]) ioContext() (context.Context, context.CancelFunc) {
	return p.clock.WithTimeout(context.Background(), p.opts.DestroyTimeout)
}

func (p *Pool[T]) record(h *Handle[T], owner string) (shared.Record, error) {
	data, err := p.codec.Encode(h.value)
	if err != nil {
		return shared.Record{}, fmt.Errorf("pool: encode: %w", err)
	}
	r := shared.Record{ID: h.id, Owner: owner, Data: data, Created: time.Unix(0, h.created)}
	if h.deadline != 0 {
		r.Deadline = time.Unix(0, h.deadline)
	}
	if h.lastUsed > 1 {
		r.LastUsed = time.Unix(0, h.lastUsed)
	}
	return r, nil
}

func (p *Pool[T]) fromRecord(r shared.Record) (*Handle[T], error) {
	v, err := p.codec.Decode(r.Data)
	if err != nil {
		return nil, fmt.Errorf("pool: decode %s: %w", r.ID, err)
	}
	h := &Handle[T]{p: p, value: v, id: r.ID, created: r.Created.UnixNano(), idx: -1}
	if !r.Deadline.IsZero() {
		h.deadline = r.Deadline.UnixNano()
	}
	if !r.LastUsed.IsZero() {
		h.lastUsed = r.LastUsed.UnixNano()
	}
	return h, nil
}

// resolveAttempts bounds the calls made for one item when the Inventory
// fails: an error may mean that the call went through and only its reply
// was lost, so the Pool asks where the record stands before it acts.
const resolveAttempts = 3

// addOutcome is what became of the record of a new item.
type addOutcome int

const (
	addDone    addOutcome = iota // recorded as in use by this instance
	addTaken                     // another instance claimed it (as an orphan) and destroys it
	addUnknown                   // no answer: not idle anywhere, so this instance destroys it
)

// addRecord records rec, a new item this instance holds, as in use by this
// instance. When Add fails it finds out with Touch whether the call went
// through (the record is then this instance's) and else adds again. An
// item created more than OrphanGracePeriod before it was recorded may have
// been taken as an orphan by some Reconcile meanwhile, destroyed, and its
// claim removed before this Add landed: it is kept only if the provider
// still lists it.
//
// The whole exchange is bounded by one DestroyTimeout.
func (s *sharedSet[T]) addRecord(rec shared.Record, started time.Time) (addOutcome, error) {
	p := s.p
	ctx, cancel := p.ioContext()
	defer cancel()
	var errs []error
	for attempt := 1; ; attempt++ {
		err := s.inv.Add(ctx, rec, p.heldTTL())
		if err == nil {
			if len(errs) > 0 {
				p.warn("inventory add retried", errors.Join(errs...), "id", rec.ID)
			}
			return s.checkLate(rec, started)
		}
		errs = append(errs, fmt.Errorf("pool: inventory add: %w", err))
		lost, terr := s.inv.Touch(ctx, p.opts.Instance, []string{rec.ID}, p.heldTTL())
		switch {
		case terr == nil && len(lost) == 0: // it went through
			p.warn("inventory add went through", errors.Join(errs...), "id", rec.ID)
			return s.checkLate(rec, started)
		case terr == nil && errors.Is(err, shared.ErrExists):
			return addTaken, errors.Join(errs...)
		case terr != nil:
			errs = append(errs, fmt.Errorf("pool: inventory touch: %w", terr))
		}
		if attempt == resolveAttempts || ctx.Err() != nil {
			return addUnknown, errors.Join(errs...)
		}
	}
}

// checkLate keeps rec, just recorded as this instance's, unless it was
// recorded too late to be safe from Reconcile and the provider no longer
// lists it.
func (s *sharedSet[T]) checkLate(rec shared.Record, started time.Time) (addOutcome, error) {
	p := s.p
	if p.lister == nil || p.clock.Since(started) < p.opts.OrphanGracePeriod {
		return addDone, nil
	}
	ctx, cancel := p.ioContext()
	defer cancel()
	listed, err := p.lister.List(ctx)
	if err != nil {
		// Unknown: destroying it is safe, its record is this instance's.
		return addUnknown, fmt.Errorf("pool: list after a late inventory add: %w", err)
	}
	for _, l := range listed {
		if l.ID == rec.ID {
			return addDone, nil
		}
	}
	if _, err := s.inv.Remove(ctx, rec.ID); err != nil {
		p.warn("inventory remove", err, "id", rec.ID)
	}
	return addTaken, fmt.Errorf("pool: item %s destroyed as an orphan before it was recorded: %w", rec.ID, shared.ErrExists)
}

// putOutcome is what became of an item offered to the shared idle set.
type putOutcome int

const (
	putDone    putOutcome = iota // in the shared idle set
	putFull                      // refused at MaxIdle: still this instance's
	putHeld                      // Put failed; the record is still this instance's in use
	putNotHeld                   // shared.ErrNotHeld: the record had expired or was taken
	putGone                      // the record is no longer this instance's (the Put went through) or nobody knows: never destroy it here
)

// putRecord offers rec, held in use by this instance, to the shared idle
// set. When Put fails the call may have gone through, and the item may
// already be in another instance's hands: putRecord asks with Touch and
// puts again only while the record is still this instance's in use. When
// it cannot find out, the item is left to its record's ttl and Reconcile.
//
// The whole exchange is bounded by one DestroyTimeout (Release waits for it).
func (s *sharedSet[T]) putRecord(rec shared.Record) (putOutcome, error) {
	p := s.p
	ctx, cancel := p.ioContext()
	defer cancel()
	var errs []error
	for attempt := 1; ; attempt++ {
		ok, err := s.inv.Put(ctx, rec, p.opts.MaxIdle, p.idleTTL())
		if err == nil {
			if len(errs) > 0 {
				p.warn("inventory put retried", errors.Join(errs...), "id", rec.ID)
			}
			if !ok {
				return putFull, nil
			}
			return putDone, nil
		}
		errs = append(errs, fmt.Errorf("pool: inventory put: %w", err))
		if errors.Is(err, shared.ErrNotHeld) {
			if attempt == 1 {
				return putNotHeld, errors.Join(errs...)
			}
			// An earlier attempt went through after all.
			p.warn("inventory put went through", errors.Join(errs...), "id", rec.ID)
			return putGone, nil
		}
		lost, terr := s.inv.Touch(ctx, p.opts.Instance, []string{rec.ID}, p.heldTTL())
		if terr == nil && len(lost) > 0 {
			// It went through (or the record was taken care of elsewhere).
			p.warn("inventory put went through", errors.Join(errs...), "id", rec.ID)
			return putGone, nil
		}
		if terr != nil {
			errs = append(errs, fmt.Errorf("pool: inventory touch: %w", terr))
		}
		if attempt == resolveAttempts || ctx.Err() != nil {
			if terr != nil {
				return putGone, errors.Join(errs...)
			}
			return putHeld, errors.Join(errs...)
		}
	}
}

// destroyClaimed destroys h, which this instance holds in the Inventory but
// not in p.items, in the background.
func (p *Pool[T]) destroyClaimed(h *Handle[T], reason Reason) {
	p.mu.Lock()
	p.destroyingLocked(h)
	p.mu.Unlock()
	go p.destroy(h, reason)
}

// createWarm creates one item for the shared idle set under reservation
// token.
func (s *sharedSet[T]) createWarm(token string) {
	p := s.p
	defer p.wg.Done()
	started := p.clock.Now()
	v, call, err := p.callCreate()
	var h *Handle[T]
	added, put := addUnknown, putHeld
	if err == nil {
		// Recorded as ours first, then offered to the idle set with Put, so
		// that MaxIdle holds even when releases fill the set meanwhile.
		h = p.newHandle(v, p.clock.Now())
		var rec shared.Record
		if rec, err = p.record(h, p.opts.Instance); err == nil {
			if added, err = s.addRecord(rec, started); added == addDone {
				put, err = s.putRecord(rec)
			}
		}
	}
	ctx, cancel := p.ioContext()
	if uerr := s.inv.Unreserve(ctx, token); uerr != nil {
		p.warn("inventory unreserve", uerr)
	}
	cancel()
	p.mu.Lock()
	p.creating--
	if call != 0 {
		p.endCreateLocked(call)
	}
	if h == nil {
		p.createFailures++
		if !p.closedLocked {
			p.pauseWarmLocked()
		}
		p.fillLocked()
		p.mu.Unlock()
		p.emit(EventCreated, "", "", err)
		p.warn("create", err)
		return
	}
	p.creates++
	p.backoff = 0
	switch {
	case added == addTaken: // another instance destroys it
	case added == addUnknown: // created, but not recorded: nobody else can use it
		p.addItemLocked(h)
		p.destroyLocked(h, reasonEvicted)
	case put == putFull:
		p.addItemLocked(h)
		p.destroyLocked(h, reasonIdle)
	case put == putHeld || put == putNotHeld:
		p.addItemLocked(h)
		p.destroyLocked(h, ReasonLost)
	}
	p.fillLocked()
	p.mu.Unlock()
	p.emit(EventCreated, "", h.id, nil)
	if err != nil {
		p.warn("inventory", err, "id", h.id)
	}
	// A pop between our Put and Unreserve saw the item twice (idle and
	// reserved) and may have skipped a refill: look again.
	s.kick()
}
