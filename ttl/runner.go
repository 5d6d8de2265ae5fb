package ttl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// RunnerOptions configures a Runner. The zero value means defaults.
type RunnerOptions struct {
	// Interval is how often the background loop ticks. Default 60 s.
	Interval time.Duration
	// Buffer, if set, is drained into the Store at the start of every tick.
	// Without it, Trackers write to the Store directly (ToStore).
	Buffer Buffer
	// BatchSize is how many buffered activities one Peek reads and one
	// MergeActivity writes. Default 1000.
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
	// Logger receives tick failures. Nil means no logging.
	Logger *slog.Logger
	// OnEvent, if set, receives EventSync, EventExpire, EventRuleError,
	// EventRuleSkipped and EventWake. See Event.
	OnEvent func(Event)
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
	onEvent   func(Event)

	tickMu sync.Mutex // serializes Tick

	mu    sync.Mutex // guards stats
	stats RunnerStats

	closeOnce sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
	wg        sync.WaitGroup
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
// and their names (Rule.String) unique.
func NewRunner(store Store, rules []Rule, opts RunnerOptions) (*Runner, error) {
	switch {
	case store == nil:
		return nil, fmt.Errorf("ttl: runner store is nil: %w", ErrInvalid)
	case opts.Interval < 0:
		return nil, fmt.Errorf("ttl: runner Interval (%v) is negative: %w", opts.Interval, ErrInvalid)
	case opts.BatchSize < 0:
		return nil, fmt.Errorf("ttl: runner BatchSize (%d) is negative: %w", opts.BatchSize, ErrInvalid)
	}
	names := make(map[string]bool, len(rules))
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("ttl: runner rules[%d]: %w", i, err)
		}
		if names[r.String()] {
			return nil, fmt.Errorf("ttl: runner rules[%d]: duplicate rule name %q: %w", i, r.String(), ErrInvalid)
		}
		names[r.String()] = true
	}
	if opts.Interval == 0 {
		opts.Interval = 60 * time.Second
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = 1000
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
		onEvent:   opts.OnEvent,
		done:      make(chan struct{}),
	}
	r.stats.Rules = make([]RuleStats, len(rules))
	for i, rule := range rules {
		r.stats.Rules[i].Name = rule.String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go r.loop(ctx, r.clock.Ticker(opts.Interval)) // made here so a mock clock drives it at once
	return r, nil
}

func (r *Runner) loop(ctx context.Context, tk *clock.Ticker) {
	defer r.wg.Done()
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
		res  TickResult
		errs []error
	)

	synced, stale, syncErr := r.sync(ctx)
	res.Synced = synced
	if r.buffer != nil && (synced > 0 || syncErr != nil) {
		r.emit(Event{Kind: EventSync, Count: synced, Err: syncErr})
	}
	if syncErr != nil {
		errs = append(errs, syncErr)
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
			errs = append(errs, err)
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
			errs = append(errs, wakeErr)
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
	return res, errors.Join(errs...)
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

func (r *Runner) emit(e Event) {
	if r.onEvent != nil {
		e.At = r.clock.Now()
		r.onEvent(e)
	}
}

// Close stops the background loop, cancelling a tick in progress, and waits
// for it. It is idempotent and always returns nil. Tick may still be called
// by hand after Close.
func (r *Runner) Close() error {
	r.closeOnce.Do(func() {
		close(r.done)
		r.cancel()
		r.wg.Wait()
	})
	return nil
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
}

// Stats returns a snapshot of the runner's counters.
func (r *Runner) Stats() RunnerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Rules = append([]RuleStats(nil), r.stats.Rules...)
	return st
}
