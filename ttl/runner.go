package ttl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// RunnerOptions configures a Runner. The zero value means defaults.
type RunnerOptions struct {
	// Interval is how often the background loop ticks. 0 means
	// DefaultInterval (60 s).
	Interval time.Duration
	// Buffer, if set, is drained into the Store at the start of every tick.
	// Without it, Trackers write to the Store directly (ToStore).
	Buffer Buffer
	// BatchSize is how many buffered activities one Peek reads and one
	// MergeActivity writes. 0 means DefaultBatchSize (1000).
	BatchSize int
	// Wake, if set, is called at the end of a tick with the ids whose
	// DesiredState the rules changed, when there are any, so that the
	// controller acts on them now rather than at its next reconcile. A
	// failed Wake is not retried (the rules will not fire again for those
	// ids), so the controller must still reconcile periodically.
	Wake func(ctx context.Context, ids []string) error
	// Clock is the time source of the loop and of Stats. Nil means real
	// time. Expiry itself is decided by the Store's clock.
	Clock clock.Clock
	// Logger receives tick failures and the first dropped event. Nil means
	// no logging.
	Logger *slog.Logger
	// OnEvent, if set, receives EventSync, EventExpire, EventRuleError,
	// EventRuleSkipped and EventWake, asynchronously (see Event).
	OnEvent func(Event)
	// EventQueue is the capacity of the queue that carries events to
	// OnEvent; when it is full, events are dropped and counted in
	// RunnerStats.EventsDropped. 0 means DefaultEventQueue (1024);
	// negative is an error.
	EventQueue int
}

// Runner is the TTL runner: every Interval it drains the Buffer into the
// Store, applies the rules in order and wakes the controller.
type Runner struct {
	store     Store
	rules     []Rule
	buffer    Buffer
	batchSize int
	wake      func(context.Context, []string) error
	clock     clock.Clock
	logger    *slog.Logger
	events    *event.Queue[Event]

	tickMu sync.Mutex // serializes Tick

	mu    sync.Mutex // guards stats
	stats RunnerStats

	closeOnce sync.Once
	cancel    context.CancelFunc
	done      chan struct{} // closed by Close: the loop stops
	stopped   chan struct{} // closed when the loop has stopped
}

// Expiry is one entity a rule changed during a tick.
type Expiry struct {
	// ID is the entity.
	ID string
	// Rule is the name of the rule that fired.
	Rule string
	// Then is the desired state the rule set.
	Then string
}

// TickResult is what one Tick did.
type TickResult struct {
	// Synced is the number of activities moved from the Buffer to the Store.
	Synced int
	// Expired lists the entities the rules changed, in rule order.
	Expired []Expiry
	// Skipped names the rules not applied because activity read from the
	// Buffer could not be merged into the Store (see Tick).
	Skipped []string
	// Duration is how long the tick took.
	Duration time.Duration
}

// NewRunner returns a Runner applying rules to store and starts its
// background loop. Stop it with Close. Rules must be valid (Rule.Validate)
// and their names (Rule.String) unique. Bad rules or options return an error
// that names them and matches ErrInvalid.
func NewRunner(store Store, rules []Rule, opts RunnerOptions) (*Runner, error) {
	switch {
	case store == nil:
		return nil, errs.Invalid(ErrInvalid, "ttl: runner store is nil")
	case opts.Interval < 0:
		return nil, errs.Invalid(ErrInvalid, "ttl: runner Interval (%v) is negative", opts.Interval)
	case opts.BatchSize < 0:
		return nil, errs.Invalid(ErrInvalid, "ttl: runner BatchSize (%d) is negative", opts.BatchSize)
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
		opts.Interval = DefaultInterval
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = DefaultBatchSize
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
		batchSize: opts.BatchSize,
		wake:      opts.Wake,
		clock:     opts.Clock,
		logger:    opts.Logger,
		events:    event.New(opts.OnEvent, opts.EventQueue, opts.Logger, "ttl: runner"),
		done:      make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	r.stats.Rules = make([]RuleStats, len(rules))
	for i, rule := range rules {
		r.stats.Rules[i].Name = rule.String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.loop(ctx, r.clock.Ticker(opts.Interval)) // made here so a mock clock drives it at once
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

// Tick runs one round, as the loop does every Interval:
//
//  1. drain the Buffer into the Store (Peek, MergeActivity, Remove, in
//     batches), so activity that reached the buffer before the tick counts;
//  2. apply every rule, in order, with Store.Apply;
//  3. call Wake with the changed ids, if any.
//
// A failing step does not stop the later ones: when the buffer is
// unreachable or lost (a restarted Redis), the Store, the source of truth,
// still decides with the activity it has, and what stays buffered is synced
// on a later tick. But when activity was read from the buffer and could not
// be merged into the Store, the Store's LastActivityAt is known to be stale,
// so the rules measured from it (SinceLastActivity) are skipped for this
// tick, rather than expire an entity whose only recent activity is still
// buffered; the other rules run. Tick returns what it did and all the
// errors joined. Concurrent calls run one after the other.
func (r *Runner) Tick(ctx context.Context) (TickResult, error) {
	r.tickMu.Lock()
	defer r.tickMu.Unlock()
	start := r.clock.Now()
	var (
		res    TickResult
		failed []error
	)

	synced, stale, syncErr := r.sync(ctx)
	res.Synced = synced
	if r.buffer != nil && (synced > 0 || syncErr != nil) {
		r.emit(Event{Kind: EventSync, Count: synced, Err: syncErr})
	}
	if syncErr != nil {
		failed = append(failed, syncErr)
	}

	perRule := make([]int, len(r.rules))
	ruleErr := make([]bool, len(r.rules))
	ruleSkip := make([]bool, len(r.rules))
	for i, rule := range r.rules {
		if stale && rule.Since == SinceLastActivity {
			ruleSkip[i] = true
			res.Skipped = append(res.Skipped, rule.String())
			r.emit(Event{Kind: EventRuleSkipped, Rule: rule.String(), Err: syncErr})
			continue
		}
		ids, err := r.store.Apply(ctx, rule)
		if err != nil {
			err = fmt.Errorf("ttl: rule %s: %w", rule, err)
			failed = append(failed, err)
			ruleErr[i] = true
			r.emit(Event{Kind: EventRuleError, Rule: rule.String(), Err: err})
		}
		perRule[i] = len(ids)
		for _, id := range ids {
			res.Expired = append(res.Expired, Expiry{ID: id, Rule: rule.String(), Then: rule.Then})
			r.emit(Event{Kind: EventExpire, ID: id, Rule: rule.String(), Then: rule.Then})
		}
	}

	var wakeErr error
	if r.wake != nil && len(res.Expired) > 0 {
		ids := make([]string, len(res.Expired))
		for i, e := range res.Expired {
			ids[i] = e.ID
		}
		if wakeErr = r.wake(ctx, ids); wakeErr != nil {
			wakeErr = fmt.Errorf("ttl: wake: %w", wakeErr)
			failed = append(failed, wakeErr)
		}
		r.emit(Event{Kind: EventWake, Count: len(ids), Err: wakeErr})
	}

	res.Duration = r.clock.Since(start)
	r.mu.Lock()
	st := &r.stats
	st.Ticks++
	st.Synced += uint64(synced)
	if syncErr != nil {
		st.SyncErrors++
	}
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
	if wakeErr != nil {
		st.WakeErrors++
	}
	st.LastTick = start
	st.LastTickDuration = res.Duration
	r.mu.Unlock()
	return res, errors.Join(failed...)
}

// sync drains the buffer into the store and returns how many activities it
// merged, and whether activity it read could not be merged (the store's
// LastActivityAt is then stale). An entry updated between Peek and Remove
// stays buffered for the next tick; merging it twice is harmless (greater
// wins).
func (r *Runner) sync(ctx context.Context) (synced int, stale bool, err error) {
	if r.buffer == nil {
		return 0, false, nil
	}
	for {
		if err := context.Cause(ctx); err != nil {
			return synced, false, fmt.Errorf("ttl: sync: %w", err)
		}
		batch, err := r.buffer.Peek(ctx, r.batchSize)
		if err != nil {
			return synced, false, fmt.Errorf("ttl: sync: read buffer: %w", err)
		}
		if len(batch) == 0 {
			return synced, false, nil
		}
		if err := r.store.MergeActivity(ctx, batch); err != nil {
			return synced, true, fmt.Errorf("ttl: sync: merge %d activities into the store: %w", len(batch), err)
		}
		synced += len(batch)
		removed, err := r.buffer.Remove(ctx, batch)
		if err != nil {
			// The batch is in the store; leaving it buffered only means
			// merging it again next tick.
			return synced, false, fmt.Errorf("ttl: sync: remove %d activities from the buffer: %w", len(batch), err)
		}
		// A short batch was the last one. When nothing could be removed,
		// every entry changed since Peek: leave them to the next tick
		// rather than chase a busy buffer.
		if len(batch) < r.batchSize || removed == 0 {
			return synced, false, nil
		}
	}
}

// emit queues e for OnEvent, if there is one.
func (r *Runner) emit(e Event) {
	if r.events.Enabled() {
		e.Time = r.clock.Now()
		r.events.Send(e)
	}
}

// Close stops the background loop, cancelling a tick in progress, and waits
// for it; then it delivers the events queued so far to OnEvent and waits for
// the callback. When ctx ends first it returns an error that wraps
// context.Cause(ctx) and says what is still running. Close is idempotent: a
// later call waits the same way and returns nil once everything has
// stopped. Tick may still be called by hand after Close; its events are
// then not delivered.
func (r *Runner) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		close(r.done)
		r.cancel()
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
	// Name is the rule's name (Rule.String).
	Name string
	// Expired is the number of entities the rule changed.
	Expired uint64
	// Errors is the number of failed applications.
	Errors uint64
	// Skipped is the number of ticks that did not apply the rule because
	// buffered activity could not be merged into the Store (see Tick).
	Skipped uint64
}

// RunnerStats is a snapshot of a Runner's counters.
type RunnerStats struct {
	// Ticks is the number of ticks run, by the loop or by hand.
	Ticks uint64
	// Synced is the number of activities moved from the Buffer to the Store.
	Synced uint64
	// Expired is the number of entities changed by all rules.
	Expired uint64
	// Rules holds per-rule counts, in rule order.
	Rules []RuleStats
	// SyncErrors, RuleErrors and WakeErrors count failed syncs, rule
	// applications and Wake calls.
	SyncErrors, RuleErrors, WakeErrors uint64
	// LastTick is when the last tick started; zero if none.
	LastTick time.Time
	// LastTickDuration is how long the last tick took.
	LastTickDuration time.Duration
	// EventsDropped is the number of events not delivered to OnEvent
	// because its queue was full.
	EventsDropped uint64
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
