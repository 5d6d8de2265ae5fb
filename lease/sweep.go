package lease

import (
	"context"

	"github.com/benbjohnson/clock"
)

// SweepResult counts what one Sweep did.
type SweepResult struct {
	Expired int // expired leases reclaimed, one EventExpired each
	Lapsed  int // of which ended by missing heartbeats, not at ExpiresAt
	Batches int // Store.Sweep calls, repeated while a batch comes back full
}

// Sweep reclaims the records of expired leases, fires one [EventExpired]
// for each, refreshes the Stats gauges and returns what it did, on an
// error too. The background loop calls it every [Options.SweepInterval].
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
