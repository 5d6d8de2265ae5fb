package hysteresis

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Gate turns samples of named signals into a State with hysteresis. It is
// safe for concurrent use. The zero value is not usable; call New. A Gate
// with Options.OnEvent or Options.Logger delivers its events on a goroutine
// of its own, which Close stops.
type Gate struct {
	// Set by New, read-only afterwards.
	clock      clock.Clock
	hold       time.Duration
	staleAfter time.Duration // 0: staleness off
	policy     StalePolicy
	events     *event.Queue[Event] // nil without OnEvent and Logger
	index      map[string]int
	base       time.Time // New's time: the origin of due

	// The lock-free read path of State and Overloaded: the state, and the
	// offset from base before which no transition can fall due without a new
	// sample (no hold can end, no signal go stale). Written under mu.
	stateA atomic.Int32
	due    atomic.Int64

	mu          sync.Mutex
	signals     []signalState
	state       State
	since       time.Time
	calm        bool      // every signal fresh and below Recover since calmSince
	calmSince   time.Time // valid when calm
	timeIn      [numStates]time.Duration
	transitions uint64
	trips       uint64
	recoveries  uint64
	samples     uint64
	rejected    uint64
	staleEvents uint64
}

type signalState struct {
	Signal
	warn     float64   // effective Warn: Trip when unset
	value    float64   // last sample
	at       time.Time // time of the last sample, or of New if never observed
	observed bool
	stale    bool // as of the last evaluation
}

// New returns a Gate watching signals, in Normal state. It returns an error
// that names the bad field and matches ErrInvalid when a signal or an option
// is invalid.
func New(signals []Signal, opts Options) (*Gate, error) {
	index, err := validateSignals(signals)
	if err != nil {
		return nil, err
	}
	if opts, err = opts.withDefaults(); err != nil {
		return nil, err
	}
	now := opts.Clock.Now()
	g := &Gate{
		clock:      opts.Clock,
		hold:       opts.Hold,
		staleAfter: opts.StaleAfter,
		policy:     opts.Stale,
		index:      index,
		base:       now,
		signals:    make([]signalState, len(signals)),
		since:      now,
	}
	for i, s := range signals {
		warn := s.Warn
		if warn == 0 {
			warn = s.Trip
		}
		g.signals[i] = signalState{Signal: s, warn: warn, at: now}
	}
	g.evaluate(now)
	g.events = newQueue(opts) // after evaluate: New's own state is no transition
	return g, nil
}

// Observe records value as the current level of the named signal and
// re-evaluates the gate. It does not allocate. A signal the gate does not
// watch or a NaN value returns an error that names the signal and matches
// ErrInvalid, and changes nothing but the Rejected counter. A transition it causes is queued for
// OnEvent; Observe never waits for the callback.
func (g *Gate) Observe(name string, value float64) error {
	i, ok := g.index[name]
	if !ok || math.IsNaN(value) {
		return g.reject(name, ok)
	}
	now := g.clock.Now()
	g.mu.Lock()
	g.catchUp(now)
	g.apply(i, value, now)
	g.evaluate(now)
	g.mu.Unlock()
	return nil
}

// ObserveAll records several signals sampled together and re-evaluates the
// gate once, so that one sampling round causes at most one transition. It
// checks every entry first: on error it records none of them.
func (g *Gate) ObserveAll(values map[string]float64) error {
	for name, v := range values {
		if _, ok := g.index[name]; !ok || math.IsNaN(v) {
			return g.reject(name, ok)
		}
	}
	now := g.clock.Now()
	g.mu.Lock()
	g.catchUp(now)
	for name, v := range values {
		g.apply(g.index[name], v, now)
	}
	g.evaluate(now)
	g.mu.Unlock()
	return nil
}

// Close delivers the events already queued to OnEvent and the Logger, stops
// the gate's event goroutine and waits for it until ctx ends; then it
// returns an error that wraps context.Cause(ctx). Close is idempotent: a
// later call waits the same way and returns nil once the goroutine has
// stopped. The gate keeps working after Close, without events; a gate
// without OnEvent and Logger has nothing to stop.
func (g *Gate) Close(ctx context.Context) error { return g.events.Close(ctx) }

func (g *Gate) reject(name string, known bool) error {
	g.mu.Lock()
	g.rejected++
	g.mu.Unlock()
	if !known {
		return errs.Invalid(ErrInvalid, "hysteresis: unknown signal %q", name)
	}
	return errs.Invalid(ErrInvalid, "hysteresis: invalid value: signal %q: NaN", name)
}

// State returns the current state, evaluated at the current time: a hold
// that has elapsed or a signal that went stale since the last sample
// counts, as it does for every read. A program whose samples may stop
// should read the gate periodically, so that OnEvent hears of stale
// signals when they fall due.
func (g *Gate) State() State {
	now := g.clock.Now()
	// Between samples the state can only change when a hold ends or a signal
	// goes stale; until the first such moment, the last state stands and the
	// lock is not needed. This keeps admission checks cheap.
	if int64(now.Sub(g.base)) < g.due.Load() {
		return State(g.stateA.Load())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.evaluate(now)
	return g.state
}

// Overloaded reports whether the gate is Overloaded now: the question an
// admission check asks before it admits work. It never runs callbacks, so it
// may be called under the caller's own locks.
func (g *Gate) Overloaded() bool { return g.State() == Overloaded }

// Last returns the last sample of every signal, in the order given to New.
func (g *Gate) Last() []Sample {
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.evaluate(now)
	out := make([]Sample, len(g.signals))
	for i := range g.signals {
		s := &g.signals[i]
		out[i] = Sample{Name: s.Name, Observed: s.observed, Stale: s.stale}
		if s.observed {
			out[i].Value, out[i].At = s.value, s.at
		}
	}
	return out
}

// isStale reports whether s has gone without a sample for longer than
// StaleAfter at now. Called with g.mu held.
func (g *Gate) isStale(s *signalState, now time.Time) bool {
	return g.staleAfter > 0 && now.Sub(s.at) > g.staleAfter
}

// catchUp evaluates the gate at now with the values it had before a new
// sample, when a hold may have ended or a signal gone stale since the last
// evaluation, so that the state never depends on whether someone read the
// gate in between: a sample at or above Recover arriving after the hold
// ended must not cancel a recovery that already happened, and a signal that
// went stale must count as not calm. Called with g.mu held.
func (g *Gate) catchUp(now time.Time) {
	if int64(now.Sub(g.base)) >= g.due.Load() {
		g.evaluate(now)
	}
}

// apply records one sample. A signal that went stale before it has been
// marked so by catchUp, which also ended the calm: the hold restarts. Called
// with g.mu held.
func (g *Gate) apply(i int, value float64, now time.Time) {
	s := &g.signals[i]
	s.value, s.at, s.observed, s.stale = value, now, true, false
	g.samples++
}

// evaluate brings the state up to date at now. Called with g.mu held.
func (g *Gate) evaluate(now time.Time) {
	var hot, warm, stale *signalState
	var staleAt time.Time // when the earliest stale signal went stale
	due := time.Duration(math.MaxInt64)
	calm := true
	for i := range g.signals {
		s := &g.signals[i]
		if g.staleAfter > 0 && !g.isStale(s, now) {
			// Stale from StaleAfter + 1ns after its last sample on.
			due = min(due, s.at.Sub(g.base)+g.staleAfter+1)
		}
		if g.isStale(s, now) {
			if !s.stale {
				s.stale = true
				g.staleEvents++
			}
			calm = false
			if at := s.at.Add(g.staleAfter); stale == nil || at.Before(staleAt) {
				stale, staleAt = s, at
			}
			// The last value still counts for Warn and Trip; the policy
			// below adds to it.
		}
		if !s.observed {
			calm = false
			continue
		}
		switch {
		case s.value >= s.Trip:
			if hot == nil {
				hot = s
			}
		case s.value >= s.warn:
			if warm == nil {
				warm = s
			}
		}
		if s.value >= s.Recover {
			calm = false
		}
	}
	switch {
	case !calm:
		g.calm = false
	case !g.calm:
		g.calm, g.calmSince = true, now
	}

	// at is when the transition happened. It is now, except for the two
	// transitions that time alone causes (a hold ending, a signal going
	// stale): those happened when they fell due, even if nobody looked at the
	// gate until later, so that Since and TimeIn do not depend on when the
	// gate is read.
	next, isStale, cause, at := g.state, false, (*signalState)(nil), now
	switch {
	case hot != nil:
		next, cause = Overloaded, hot
	case stale != nil && g.policy == StaleTrip:
		next, isStale, cause, at = Overloaded, true, stale, staleAt
	case g.state == Overloaded:
		if g.calm && now.Sub(g.calmSince) >= g.hold {
			next, at = Normal, g.calmSince.Add(g.hold)
			if warm != nil {
				next = Warning
			}
		}
	case warm != nil:
		next, cause = Warning, warm
	case stale != nil && g.policy == StaleWarn:
		next, isStale, cause, at = Warning, true, stale, staleAt
	default:
		next = Normal
	}
	if next != g.state {
		if at.Before(g.since) {
			at = g.since
		}
		g.transition(next, at, isStale, cause)
	}
	if g.state == Overloaded && g.calm {
		due = min(due, g.calmSince.Sub(g.base)+g.hold)
	}
	g.stateA.Store(int32(g.state))
	g.due.Store(int64(due))
}

// transition moves the gate to state to, because cause reached a threshold
// or went stale (isStale), or because every signal calmed down (cause nil).
// Called with g.mu held.
func (g *Gate) transition(to State, now time.Time, isStale bool, cause *signalState) {
	from := g.state
	if d := now.Sub(g.since); d > 0 {
		g.timeIn[from] += d
	}
	g.state, g.since = to, now
	// Publish the state before the event can reach a callback (it is
	// delivered on another goroutine), so a callback that asks the gate
	// sees the state it is told about.
	g.stateA.Store(int32(to))
	g.transitions++
	if to == Overloaded {
		g.trips++
	}
	if from == Overloaded {
		g.recoveries++
	}
	if !g.events.Enabled() {
		return
	}
	e := Event{Time: now, From: from, To: to, Stale: isStale}
	if cause != nil {
		e.Signal = cause.Name
		if !isStale {
			e.Value = cause.value
			e.Threshold = cause.Trip
			if to == Warning {
				e.Threshold = cause.warn
			}
		}
	}
	// Send never blocks: a full queue drops e and counts it.
	g.events.Send(e)
}
