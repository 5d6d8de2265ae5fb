package ttl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// RunnerOptions configures a Runner. The zero value means defaults.
type RunnerOptions struct {
	// Interval is how often the loop ticks, and how long a drain may run:
	// 60 s if zero; no loop if negative (call Tick), and drains run to the end.
	Interval  time.Duration
	Buffer    Buffer // if set, drained into the Store each tick
	BatchSize int    // activities per Peek and Store.Add: 1000 if zero
	// Hold is how long idle rules are skipped after a tick found the Buffer
	// unreadable or lost, or (without a Buffer) the Store refusing rules:
	// 30 s + Interval if zero; negative is an error. Once a Paced Buffer has
	// notes, it is their longest FlushInterval plus Interval, at least Hold.
	Hold time.Duration
	// Wake, if set, gets the entities a tick changed. It is not retried, so
	// the controller also reconciles the entities whose desired state is set.
	Wake func(ctx context.Context, expired []Expiry) error

	Clock      clock.Clock  // loop and Stats; nil means real time (the Store decides expiry)
	Logger     *slog.Logger // tick failures and the first dropped event; nil means none
	OnEvent    func(Event)  // if set, gets EventExpire, EventRuleError, EventRuleSkipped, EventBufferLost
	EventQueue int          // OnEvent's queue (see Event): 1024 if zero; negative is an error
}

// Runner drains the Buffer into the Store every Interval, applies the
// rules in order and wakes the controller.
type Runner struct {
	store     Store
	rules     []Rule
	buffer    Buffer
	interval  time.Duration
	hold      time.Duration // when no Tracker's FlushInterval is known
	minHold   time.Duration // RunnerOptions.Hold as given
	lossy     Lossy         // buffer's generation, if it has one
	paced     Paced         // the Trackers' FlushInterval, if the buffer keeps it
	batchSize int
	wake      func(context.Context, []Expiry) error
	clock     clock.Clock
	logger    *slog.Logger
	events    *eventQueue

	tickMu    sync.Mutex    // serializes Tick; guards gen, holdUntil and flush
	gen       string        // the buffer generation seen last, "" if none yet
	holdUntil time.Time     // idle rules wait until then
	flush     time.Duration // the longest FlushInterval the buffer has shown

	mu    sync.Mutex // guards stats
	stats RunnerStats

	closeOnce sync.Once
	cancel    context.CancelCauseFunc
	done      chan struct{} // closed by Close: the loop stops
	stopped   chan struct{} // closed when the loop has stopped
}

// TickResult is what one Tick did.
type TickResult struct {
	Synced    int           // activities moved from the Buffer to the Store
	Expired   []Expiry      // entities the rules changed, in rule order
	Drained   bool          // the drain reached the Buffer's end (always, without a Buffer)
	Lost      bool          // a Lossy Buffer lost its contents since the last tick
	Skipped   []string      // SinceLastActivity rules skipped (see Runner.Tick)
	HeldUntil time.Time     // end of the hold on those rules, if in force after the tick
	Duration  time.Duration // how long the tick took
}

// NewRunner starts a Runner applying rules to store; stop it with Close.
// Invalid or duplicate rules ([Rule.String]) or bad options return an error
// that names them and matches [ErrInvalid].
func NewRunner(store Store, rules []Rule, opts RunnerOptions) (*Runner, error) {
	switch {
	case store == nil:
		return nil, errs.Invalid(ErrInvalid, "ttl: runner store is nil")
	case opts.BatchSize < 0:
		return nil, errs.Invalid(ErrInvalid, "ttl: runner BatchSize (%d) is negative", opts.BatchSize)
	case opts.Hold < 0:
		return nil, errs.Invalid(ErrInvalid, "ttl: runner Hold (%v) is negative", opts.Hold)
	}
	if err := event.CheckSize("ttl: runner", "EventQueue", opts.EventQueue); err != nil {
		return nil, errs.Invalid(ErrInvalid, "%v", err)
	}
	names := make(map[string]bool, len(rules))
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("ttl: runner rules[%d]: %w", i, err)
		}
		if names[r.String()] {
			return nil, errs.Invalid(ErrInvalid, "ttl: runner rules[%d]: duplicate rule name %q", i, r.String())
		}
		names[r.String()] = true
	}
	if opts.Interval == 0 {
		opts.Interval = defaultInterval
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = defaultBatchSize
	}
	minHold := opts.Hold
	if opts.Hold == 0 {
		opts.Hold = defaultFlushInterval + max(opts.Interval, 0)
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	r := &Runner{
		store:     store,
		rules:     append([]Rule(nil), rules...),
		buffer:    opts.Buffer,
		interval:  opts.Interval,
		hold:      opts.Hold,
		minHold:   minHold,
		batchSize: opts.BatchSize,
		wake:      opts.Wake,
		clock:     opts.Clock,
		logger:    opts.Logger,
		events:    newEventQueue(opts.OnEvent, opts.EventQueue, opts.Logger, "ttl: runner"),
		done:      make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	r.lossy, _ = opts.Buffer.(Lossy)
	r.paced, _ = opts.Buffer.(Paced)
	r.stats.Rules = make([]RuleStats, len(rules))
	for i, rule := range rules {
		r.stats.Rules[i].Name = rule.String()
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	r.cancel = cancel
	if opts.Interval > 0 {
		go r.loop(ctx, r.clock.Ticker(opts.Interval)) // made here so a mock clock drives it at once
	} else {
		close(r.stopped)
	}
	return r, nil
}

func (r *Runner) loop(ctx context.Context, tk *clock.Ticker) {
	defer close(r.stopped)
	defer tk.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tk.C:
			if _, err := r.Tick(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("ttl: runner tick failed", "err", err)
			}
		}
	}
}

// Tick runs one round, as the loop does every Interval: it drains the
// Buffer into the Store for at most Interval, applies the rules in order,
// and calls Wake if they changed entities. SinceLastActivity rules are
// skipped unless the drain reached the Buffer's end, and during a hold
// ([RunnerOptions.Hold]); the other rules and Wake always run. Tick returns
// what it did and all errors joined. Concurrent calls run one at a time.
func (r *Runner) Tick(ctx context.Context) (TickResult, error) {
	r.tickMu.Lock()
	defer r.tickMu.Unlock()
	start := r.clock.Now()
	var (
		res    TickResult
		failed []error
	)

	d := r.drain(ctx, start)
	res.Synced = d.synced
	res.Drained = d.complete
	syncErr := d.err
	if closing(ctx) {
		syncErr = nil
	}
	if d.err != nil {
		failed = append(failed, d.err)
	}
	r.readFlushInterval(ctx, d)
	if d.lost {
		r.emit(Event{Kind: EventBufferLost})
		r.logger.Warn("ttl: runner found the buffer lost; idle rules wait for the trackers to send again", "hold", r.holdFor())
	}
	if d.lost || d.reason == reasonBufferError {
		r.holdFrom(r.clock.Now())
	}
	res.Lost = d.lost
	var skip reason
	switch {
	case !d.complete:
		skip = d.reason
	case d.lost:
		skip = reasonBufferLost
	case r.clock.Now().Before(r.holdUntil):
		skip = reasonHeld
	}
	if skip != "" && skip != reasonHeld {
		r.logger.Warn("ttl: runner skips the last-activity rules this tick", "reason", string(skip), "synced", d.synced, "err", d.err)
	}

	perRule := make([]int, len(r.rules))
	ruleErr := make([]bool, len(r.rules))
	ruleSkip := make([]bool, len(r.rules))
	for i, rule := range r.rules {
		if skip != "" && rule.Since == SinceLastActivity {
			ruleSkip[i] = true
			res.Skipped = append(res.Skipped, rule.String())
			r.emit(Event{Kind: EventRuleSkipped, Rule: rule.String(), Err: d.err})
			continue
		}
		exps, err := r.store.Apply(ctx, rule)
		if err != nil {
			err = fmt.Errorf("ttl: rule %s: %w", rule, err)
			failed = append(failed, err)
			if !closing(ctx) {
				ruleErr[i] = true
				r.emit(Event{Kind: EventRuleError, Rule: rule.String(), Err: err})
			}
		}
		perRule[i] = len(exps)
		for _, e := range exps {
			e.Rule, e.Then = rule.String(), rule.Then
			res.Expired = append(res.Expired, e)
			r.emit(Event{Kind: EventExpire, ID: e.ID, Rule: e.Rule, Then: e.Then})
		}
	}

	if r.buffer == nil && slices.Contains(ruleErr, true) {
		// Trackers write to the Store directly: their flushes fail too
		// while it is down, and are retried only every FlushInterval.
		r.holdFrom(r.clock.Now())
	}
	if now := r.clock.Now(); now.Before(r.holdUntil) {
		res.HeldUntil = r.holdUntil
	}

	var wakeErr error
	if r.wake != nil && len(res.Expired) > 0 {
		if wakeErr = r.wake(ctx, slices.Clone(res.Expired)); wakeErr != nil {
			wakeErr = fmt.Errorf("ttl: wake: %w", wakeErr)
			failed = append(failed, wakeErr)
		}
	}

	res.Duration = r.clock.Since(start)
	r.mu.Lock()
	st := &r.stats
	st.Ticks++
	st.Synced += uint64(d.synced)
	if syncErr != nil {
		st.SyncErrors++
	}
	if !d.complete {
		st.IncompleteDrains++
	}
	if d.lost {
		st.BufferLosses++
	}
	st.HeldUntil = res.HeldUntil
	st.FlushInterval = r.flush
	for i := range r.rules {
		st.Rules[i].Expired += uint64(perRule[i])
		st.Expired += uint64(perRule[i])
		if ruleErr[i] {
			st.Rules[i].Errors++
			st.RuleErrors++
		}
		if ruleSkip[i] {
			st.Rules[i].Skipped++
		}
	}
	if wakeErr != nil && !closing(ctx) {
		st.WakeErrors++
	}
	st.LastTick = start
	st.LastTickDuration = res.Duration
	r.mu.Unlock()
	return res, errors.Join(failed...)
}

// errClosed is the cause with which Close cancels the loop's tick.
var errClosed = errors.New("ttl: runner closed")

// closing reports whether ctx is a loop tick's that Close cancelled: what
// then fails is the tick being stopped, not the Buffer, the Store or Wake,
// so it counts as no error, is reported in no error event, and starts no
// hold.
func closing(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errClosed)
}

// reason says why a tick skips its SinceLastActivity rules, in the log.
type reason string

const (
	// reasonMergeFailed: activity read from the Buffer could not be
	// merged into the Store.
	reasonMergeFailed reason = "merge_failed"
	// reasonBufferError: reading or removing from the Buffer failed, so
	// the drain did not reach the end of the buffer.
	reasonBufferError reason = "buffer_error"
	// reasonDrainIncomplete: the drain did not reach the end of the buffer
	// within one Interval (or its context ended).
	reasonDrainIncomplete reason = "drain_incomplete"
	// reasonBufferLost: the Buffer lost its contents since the last tick,
	// or during this one's drain.
	reasonBufferLost reason = "buffer_lost"
	// reasonHeld: the drain completed, but an earlier tick found the
	// Buffer lost or unreadable and the hold that started then is not
	// over.
	reasonHeld reason = "held"
)

// drainResult is what one drain did.
type drainResult struct {
	synced   int    // activities merged into the store
	complete bool   // the walk reached the end of the buffer
	reason   reason // why not, when not complete
	lost     bool   // the buffer's generation changed
	err      error
}

// holdFrom holds the idle rules until at least now plus holdFor.
func (r *Runner) holdFrom(now time.Time) {
	if until := now.Add(r.holdFor()); until.After(r.holdUntil) {
		r.holdUntil = until
	}
}

// holdFor returns how long the idle rules wait after a loss or an outage:
// the longest FlushInterval the Trackers noted in the buffer plus
// Interval, and at least RunnerOptions.Hold; with none noted, Hold or its
// default (see RunnerOptions.Hold).
func (r *Runner) holdFor() time.Duration {
	if r.flush == 0 {
		return r.hold
	}
	return max(r.minHold, r.flush+max(r.interval, 0))
}

// readFlushInterval reads the longest FlushInterval the Trackers noted in
// a Paced buffer, unless the drain found the buffer unreadable, and keeps
// the longest it has read: a buffer that loses its contents loses the
// notes too, just when the Runner needs them.
func (r *Runner) readFlushInterval(ctx context.Context, d drainResult) {
	if r.paced == nil || d.reason == reasonBufferError {
		return
	}
	if f, err := r.paced.FlushInterval(ctx); err == nil {
		r.flush = max(r.flush, f)
	}
}

// checkGeneration reads the buffer's generation and reports whether it
// differs from the one seen before.
func (r *Runner) checkGeneration(ctx context.Context) (lost bool, err error) {
	g, err := r.lossy.Generation(ctx)
	if err != nil {
		return false, fmt.Errorf("ttl: sync: read buffer generation: %w", err)
	}
	lost = r.gen != "" && g != r.gen
	r.gen = g
	return lost, nil
}

// drain walks the buffer once, page by page, merging every page into the
// store and removing it (see Tick). It stops short, incomplete, on the
// first failure, when ctx ends, or when it has run for one Interval. A
// Lossy buffer's generation is read after the walk: a change since the
// previous read is a loss.
//
// A drain that ctx cut short is incomplete (reasonDrainIncomplete),
// whatever call ctx's end made fail: the buffer and the store did not fail,
// so it starts no hold.
func (r *Runner) drain(ctx context.Context, start time.Time) (d drainResult) {
	if r.buffer == nil {
		d.complete = true
		return d
	}
	stop := func(why reason, err error) drainResult {
		if context.Cause(ctx) != nil {
			why = reasonDrainIncomplete
		}
		d.reason, d.err = why, err
		return d
	}
	if r.lossy != nil {
		// One read after the walk sees every loss since the previous read,
		// whether it happened between the ticks or during this walk.
		defer func() {
			if d.reason == reasonBufferError {
				return // the buffer is unreachable, and the rules held anyway
			}
			if err := context.Cause(ctx); err != nil {
				// Not read: a loss is seen by the next read, which
				// compares with the generation seen before.
				if d.complete {
					d.complete, d.reason, d.err = false, reasonDrainIncomplete, fmt.Errorf("ttl: sync: %w", err)
				}
				return
			}
			lost, err := r.checkGeneration(ctx)
			switch {
			case err != nil:
				d.complete = false
				d.reason = reasonBufferError
				if context.Cause(ctx) != nil {
					d.reason = reasonDrainIncomplete
				}
				d.err = errors.Join(d.err, err)
			case lost:
				d.lost = true
			}
		}()
	}
	var after Activity
	for {
		if err := context.Cause(ctx); err != nil {
			return stop(reasonDrainIncomplete, fmt.Errorf("ttl: sync: %w", err))
		}
		if r.interval > 0 && r.clock.Since(start) > r.interval {
			return stop(reasonDrainIncomplete, nil)
		}
		batch, err := r.buffer.Peek(ctx, after, r.batchSize)
		if err != nil {
			return stop(reasonBufferError, fmt.Errorf("ttl: sync: read buffer: %w", err))
		}
		if len(batch) == 0 {
			d.complete = true
			return d
		}
		if err := r.store.Add(ctx, batch); err != nil {
			return stop(reasonMergeFailed, fmt.Errorf("ttl: sync: merge %d activities into the store: %w", len(batch), err))
		}
		d.synced += len(batch)
		// What Remove leaves behind was made newer since the Peek: it lies
		// further along the walk, which reads it again.
		if _, err := r.buffer.Remove(ctx, batch); err != nil {
			return stop(reasonBufferError, fmt.Errorf("ttl: sync: remove %d activities from the buffer: %w", len(batch), err))
		}
		if len(batch) < r.batchSize {
			d.complete = true
			return d
		}
		after = batch[len(batch)-1]
	}
}

// emit queues e for OnEvent, if there is one.
func (r *Runner) emit(e Event) {
	if r.events.Enabled() {
		e.Time = r.clock.Now()
		r.events.Send(e)
	}
}

// Close stops the loop, cancelling a tick in progress (no failure, no hold),
// delivers the queued events and waits for OnEvent. If ctx ends first, it
// returns an error wrapping context.Cause(ctx). Later calls wait the same
// way and return nil. Tick works after Close; its events are not delivered.
func (r *Runner) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		close(r.done)
		r.cancel(errClosed)
	})
	select {
	case <-r.stopped:
	case <-ctx.Done():
		return fmt.Errorf("ttl: runner: tick loop still running: %w", context.Cause(ctx))
	}
	return r.events.Close(ctx)
}

// RuleStats counts what one rule did.
type RuleStats struct {
	Name    string // the rule's name (Rule.String)
	Expired uint64 // entities the rule changed
	Errors  uint64 // failed applications
	Skipped uint64 // ticks that skipped the rule (see Runner.Tick)
}

// RunnerStats is a snapshot of a Runner's counters.
type RunnerStats struct {
	Ticks   uint64      // ticks run, by the loop or by hand
	Synced  uint64      // activities moved from the Buffer to the Store
	Expired uint64      // entities changed by all rules
	Rules   []RuleStats // per rule, in rule order

	SyncErrors, RuleErrors, WakeErrors uint64 // failed drains, rule applications, Wake calls

	IncompleteDrains uint64        // drains that stopped short of the Buffer's end
	BufferLosses     uint64        // losses of a Lossy Buffer seen
	FlushInterval    time.Duration // longest seen in a Paced Buffer; 0 if none (see RunnerOptions.Hold)
	HeldUntil        time.Time     // TickResult.HeldUntil of the last tick
	LastTick         time.Time     // start of the last tick; zero if none
	LastTickDuration time.Duration // how long the last tick took
	EventsDropped    uint64        // events dropped (see Event)
}

// Stats returns a snapshot of the runner's counters.
func (r *Runner) Stats() RunnerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Rules = append([]RuleStats(nil), r.stats.Rules...)
	st.EventsDropped = r.events.Dropped()
	return st
}
