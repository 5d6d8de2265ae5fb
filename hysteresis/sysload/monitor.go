package sysload

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/internal/errs"
)

// MonitorOptions configures a Monitor. The zero value samples every second.
type MonitorOptions struct {
	// Interval between samples. Zero means 1 second; a negative Interval
	// runs no sampling loop: the program calls [Monitor.Step] itself. Give
	// the gate a StaleAfter of a few intervals, so that a sampler that keeps
	// failing shows.
	Interval time.Duration

	// Clock drives the sampling ticker. nil means real time.
	Clock clock.Clock

	// OnSample, when set, receives every successful sample after it has been
	// fed to the gate (so the gate's state already reflects it). It runs on
	// the goroutine that called Step, which for the Monitor's own loop is the
	// loop itself: a slow OnSample delays the next sample.
	OnSample func(Load)

	// OnError, when set, receives every sampling error.
	OnError func(error)

	// Logger, when set, logs sampling errors at Warn level.
	Logger *slog.Logger
}

// Monitor samples a Sampler every interval on its own goroutine and feeds the
// gate. Close stops it. [Monitor.Step] takes one sample by hand.
type Monitor struct {
	sampler  Sampler
	gate     *hysteresis.Gate
	opts     MonitorOptions
	cpu, mem bool // the gate watches these signals
	swap     bool

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	samples uint64
	errs    uint64
	last    Load
	lastErr error
}

// MonitorStats is a snapshot of a Monitor's counters.
type MonitorStats struct {
	// Samples counts successful samples fed to the gate; Errors failed ones.
	Samples, Errors uint64
	// Last is the last successful sample (zero before the first).
	Last Load
	// LastError is the last sampling error, nil if none since the last success.
	LastError error
}

// NewMonitor starts a Monitor feeding gate from sampler every interval. The
// gate must watch at least one of the signals [CPU], [Memory] and [Swap]
// (else the error matches hysteresis.ErrInvalid); the Monitor feeds those it
// watches. The first sample is taken one interval after NewMonitor returns.
func NewMonitor(sampler Sampler, gate *hysteresis.Gate, opts MonitorOptions) (*Monitor, error) {
	if sampler == nil || gate == nil {
		return nil, errs.Invalid(hysteresis.ErrInvalid, "sysload: NewMonitor needs a sampler and a gate")
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	m := &Monitor{sampler: sampler, gate: gate, opts: opts, done: make(chan struct{})}
	for _, s := range gate.Last() {
		switch s.Name {
		case CPU:
			m.cpu = true
		case Memory:
			m.mem = true
		case Swap:
			m.swap = true
		}
	}
	if !m.cpu && !m.mem && !m.swap {
		return nil, errs.Invalid(hysteresis.ErrInvalid, "sysload: gate watches none of cpu, memory, swap")
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	if opts.Interval < 0 {
		close(m.done) // no loop
		return m, nil
	}
	ticker := opts.Clock.Ticker(opts.Interval)
	go m.loop(ctx, ticker)
	return m, nil
}

func (m *Monitor) loop(ctx context.Context, ticker *clock.Ticker) {
	defer close(m.done)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_, _ = m.Step(ctx)
		}
	}
}

// Step takes one sample and feeds it to the gate: the synchronous form of the
// Monitor's loop, for tests and for programs that drive their own schedule.
// On a sampling error it feeds nothing, reads the gate's State (so that
// the gate's OnEvent hears of signals going stale) and returns the error. A sample cut
// short because ctx ended (or the Monitor closed) is returned but not counted
// or reported as a sampling error.
func (m *Monitor) Step(ctx context.Context) (Load, error) {
	l, err := m.sampler.Sample(ctx)
	if err != nil && ctx.Err() != nil {
		return Load{}, err
	}
	if err != nil {
		return Load{}, m.failed(err)
	}
	values := make(map[string]float64, 3)
	if m.cpu {
		values[CPU] = l.CPU
	}
	if m.mem {
		values[Memory] = l.Memory
	}
	if m.swap {
		values[Swap] = float64(l.Swap)
	}
	if err := m.gate.ObserveAll(values); err != nil {
		return Load{}, m.failed(err) // NaN from a custom Sampler
	}
	m.mu.Lock()
	m.samples++
	m.last, m.lastErr = l, nil
	m.mu.Unlock()
	if m.opts.OnSample != nil {
		m.opts.OnSample(l)
	}
	return l, nil
}

// failed counts and reports a sample that could not be fed to the gate, and
// lets the gate notice signals going stale. It returns err.
func (m *Monitor) failed(err error) error {
	m.mu.Lock()
	m.errs++
	m.lastErr = err
	m.mu.Unlock()
	m.gate.State()
	if m.opts.Logger != nil {
		m.opts.Logger.Warn("sysload: sample failed", slog.Any("error", err))
	}
	if m.opts.OnError != nil {
		m.opts.OnError(err)
	}
	return err
}

// Stats returns a snapshot of the Monitor's counters.
func (m *Monitor) Stats() MonitorStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MonitorStats{Samples: m.samples, Errors: m.errs, Last: m.last, LastError: m.lastErr}
}

// Close stops the sampling loop, cancelling a sample in progress, and waits
// for it to return until ctx ends; then it returns an error that wraps
// context.Cause(ctx). Close is idempotent: a later call waits the same way
// and returns nil once the loop has stopped. It does not close the gate,
// which the caller owns.
func (m *Monitor) Close(ctx context.Context) error {
	m.closeOnce.Do(m.cancel)
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sysload: sampling loop still running: %w", context.Cause(ctx))
	}
}
