package lease

import (
	"context"

	"github.com/benbjohnson/clock"
)

// SweepResult counts what one Sweep did.
type SweepResult struct {
	// Expired is how many records of expired leases the sweep reclaimed;
	// it fired one EventExpired for each.
	Expired int
	// Lapsed is how many of them ended by missing heartbeats (their
	// HeartbeatAt + Grace came before ExpiresAt) rather than by reaching
	// ExpiresAt.
	Lapsed int
	// Batches is how many Store.Sweep calls the sweep made: it repeats the
	// call while a batch of Options.SweepBatch comes back full.
	Batches int
}

// Sweep reclaims the records of expired leases, fires one EventExpired per
// lease, refreshes the Stats gauges and returns what it did. The background
// loop calls it every SweepInterval. Expired leases are absent for every read
// and for the budget whether or not Sweep has run. On an error the result
// counts the leases reclaimed (and reported) before it. After Close it
// returns ErrClosed.
func (m *Manager) Sweep(ctx context.Context) (SweepResult, error) {
	var r SweepResult
	if m.isClosed() {
		return r, ErrClosed
	}
	for {
		ls, err := m.store.Sweep(ctx, m.opts.SweepBatch)
		r.Batches++
		r.Expired += len(ls)
		m.stats.expired.Add(uint64(len(ls)))
		for _, l := range ls {
			if lapsed(l) {
				r.Lapsed++
				m.stats.expiredLapsed.Add(1)
			}
			if m.events.Enabled() {
				m.emit(Event{Kind: EventExpired, Lease: l})
			}
		}
		if err != nil {
			m.countFailure(err, nil)
			return r, err
		}
		if len(ls) < m.opts.SweepBatch {
			break
		}
	}
	m.stats.sweeps.Add(1)
	if _, _, err := m.Usage(ctx); err != nil {
		return r, err
	}
	return r, nil
}

func (m *Manager) sweepLoop(ctx context.Context, t *clock.Ticker) {
	defer t.Stop()
	for {
		select {
		case <-m.closing:
			return
		case <-t.C:
			r, err := m.Sweep(ctx)
			switch {
			case err != nil && !m.isClosed():
				m.log.Warn("lease: sweep", "err", err, "expired", r.Expired)
			case r.Expired > 0:
				m.log.Debug("lease: sweep", "expired", r.Expired, "lapsed", r.Lapsed)
			}
		}
	}
}
