package expiry

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Keyspace is what an Expirer needs from a store: sampling the keys with a
// deadline, deleting the expired ones.
type Keyspace interface {
	// ExpireSample examines up to n keys that carry a deadline, chosen at random (uniformly enough that
	// long-lived keys cannot hide expired ones), and deletes each whose deadline is at or before now,
	// checking the deadline again under the store's own lock. It returns how many keys it examined and
	// how many it deleted. It examines fewer than n keys only when it examined every key that carries a
	// deadline (0 when none does): the cycle then knows nothing expired is left and stops. It should hold
	// its lock for this one batch only, so that readers are never stalled for long.
	ExpireSample(now time.Time, n int) (sampled, expired int)
}

// CycleResult describes one active-expiry cycle.
type CycleResult struct {
	Rounds   int           // sample rounds run
	Sampled  int           // keys examined
	Expired  int           // keys deleted
	Duration time.Duration // time spent, as the Expirer's clock measures it
	// BudgetHit reports that the cycle stopped because it spent its budget
	// (Options.Budget or Options.MaxRounds) while the expired share was
	// still above Threshold; the next cycle resumes the work.
	BudgetHit bool
}

// Expirer runs active expiry over a [Keyspace]: a cycle ([Expirer.Cycle])
// every [Options.Interval] on a goroutine that Close stops, sooner while
// cycles end on their budget ([Options.NoCatchUp]). Cycles never overlap.
type Expirer struct {
	ks     Keyspace
	opts   Options
	clk    clock.Clock
	budget time.Duration
	log    *slog.Logger

	cycleMu sync.Mutex // serialises cycles

	lifeMu   sync.Mutex
	started  bool // the loop runs (positive Interval)
	closed   bool
	stopping atomic.Bool
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when the loop has stopped
	cancel   context.CancelFunc

	cycles, rounds, sampled, expired, budgetHits atomic.Uint64
	stale                                        atomic.Uint64 // float64 bits
	lastCycle                                    atomic.Int64
}

// NewExpirer returns a running Expirer over ks; bad options match [ErrInvalid].
func NewExpirer(ks Keyspace, opts Options) (*Expirer, error) {
	e, err := newExpirer(ks, opts)
	if err != nil {
		return nil, err
	}
	e.start()
	return e, nil
}

// newExpirer returns an Expirer whose loop is not started yet.
func newExpirer(ks Keyspace, opts Options) (*Expirer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.New()
	}
	return &Expirer{
		ks:     ks,
		opts:   o,
		clk:    clk,
		budget: o.Budget,
		log:    o.Logger,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}, nil
}

// start starts the goroutine that runs a cycle every Interval, unless
// Interval is negative.
func (e *Expirer) start() {
	if e.opts.Interval < 0 {
		return
	}
	e.started = true
	t := e.clk.Ticker(e.opts.Interval)
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go e.loop(ctx, t)
}

func (e *Expirer) loop(ctx context.Context, t *clock.Ticker) {
	defer close(e.done)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		// Catch up: while cycles end on their budget, run the next one
		// after a pause as long as the cycle instead of a whole interval
		// later (Redis's fast cycles play this part), so a backlog gets
		// up to half a processor rather than Budget of one.
		for r, _ := e.Cycle(ctx); r.BudgetHit && !e.opts.NoCatchUp; r, _ = e.Cycle(ctx) {
			pause := e.clk.Timer(max(r.Duration, time.Millisecond))
			select {
			case <-e.stop:
				pause.Stop()
				return
			case <-pause.C:
			}
		}
	}
}

// Close stops the background goroutine, interrupting a running cycle between
// two rounds, and waits for it until ctx ends (then its error wraps
// context.Cause(ctx)); later calls return nil once it has stopped. Cycle still
// works after Close.
func (e *Expirer) Close(ctx context.Context) error {
	e.lifeMu.Lock()
	started := e.started
	if !e.closed {
		e.closed = true
		e.stopping.Store(true)
		close(e.stop)
		if e.cancel != nil {
			e.cancel()
		}
	}
	e.lifeMu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return fmt.Errorf("expiry: active expiry cycle still running: %w", context.Cause(ctx))
	}
	e.stopping.Store(false)
	return nil
}

// yieldEvery is how many rounds (a few tens of microseconds) a cycle runs
// between two runtime.Gosched calls, so that a goroutine waiting for the
// processor the cycle runs on gets it back quickly.
const yieldEvery = 16

// window is how many recent rounds the repeat decision looks at. One
// 20-key round is a noisy estimate: at 55 % expired, about one round in 200
// finds 5 or fewer, so a cycle deciding on single rounds stops early, by
// chance, in almost every mass expiry that takes thousands of rounds. Over
// 8 rounds (160 keys) the share of the sample stays within a few points of
// the truth, while a cycle that truly reached the threshold stops at most 7
// rounds later. A cycle's first rounds decide on what they have.
const window = 8

// Cycle runs one active-expiry cycle now and returns what it did: rounds
// of SampleSize keys, repeated while more than Threshold of the keys
// sampled by the last rounds (up to 8) was expired, until a round examines
// fewer than SampleSize keys (all there were) or the budget is spent.
//
// When ctx ends, the cycle stops between two rounds and returns what it
// did with an error wrapping context.Cause(ctx); that is the only error.
// With a ctx that has already ended, Cycle does nothing.
func (e *Expirer) Cycle(ctx context.Context) (CycleResult, error) {
	if err := errs.Canceled(ctx, "expiry", "cycle"); err != nil {
		return CycleResult{}, err
	}
	e.cycleMu.Lock()
	defer e.cycleMu.Unlock()

	var r CycleResult
	var err error
	var recent [window]struct{ sampled, expired int }
	start := e.clk.Now()
	lastRatio := -1.0
	for !e.stopping.Load() {
		if r.Rounds > 0 {
			if err = errs.Canceled(ctx, "expiry", "cycle"); err != nil {
				break
			}
		}
		now := e.clk.Now()
		if r.Rounds > 0 && now.Sub(start) >= e.budget {
			r.BudgetHit = true
			break
		}
		if e.opts.MaxRounds > 0 && r.Rounds >= e.opts.MaxRounds {
			r.BudgetHit = true
			break
		}
		s, x := e.ks.ExpireSample(now, e.opts.SampleSize)
		recent[r.Rounds%window] = struct{ sampled, expired int }{s, x}
		r.Rounds++
		r.Sampled += s
		r.Expired += x
		if s < e.opts.SampleSize {
			// Every key with a deadline was examined and the expired
			// ones deleted: none is left to find.
			lastRatio = 0
			break
		}
		ws, wx := 0, 0
		for _, w := range recent {
			ws += w.sampled
			wx += w.expired
		}
		lastRatio = float64(wx) / float64(ws)
		if lastRatio <= e.opts.Threshold {
			break
		}
		if r.Rounds%yieldEvery == 0 {
			runtime.Gosched()
		}
	}
	r.Duration = e.clk.Since(start)

	e.cycles.Add(1)
	e.rounds.Add(uint64(r.Rounds))
	e.sampled.Add(uint64(r.Sampled))
	e.expired.Add(uint64(r.Expired))
	e.lastCycle.Store(int64(r.Duration))
	if r.BudgetHit {
		e.budgetHits.Add(1)
		if e.log != nil {
			e.log.LogAttrs(context.Background(), slog.LevelDebug, "expiry: cycle hit its budget",
				slog.Int("rounds", r.Rounds), slog.Int("expired", r.Expired),
				slog.Duration("duration", r.Duration))
		}
	}
	if lastRatio >= 0 {
		// The ratio of the last rounds is what the cycle leaves behind;
		// smooth the noise of its small sample over cycles.
		old := math.Float64frombits(e.stale.Load())
		if e.cycles.Load() == 1 {
			old = lastRatio
		}
		e.stale.Store(math.Float64bits(old/2 + lastRatio/2))
	}
	return r, err
}

// Stats returns a snapshot of the Expirer's counters, the active-expiry fields
// of [Stats].
func (e *Expirer) Stats() Stats {
	return Stats{
		Cycles:        e.cycles.Load(),
		Rounds:        e.rounds.Load(),
		Sampled:       e.sampled.Load(),
		ExpiredActive: e.expired.Load(),
		BudgetHits:    e.budgetHits.Load(),
		StaleEstimate: math.Float64frombits(e.stale.Load()),
		LastCycle:     time.Duration(e.lastCycle.Load()),
	}
}
