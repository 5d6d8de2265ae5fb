package leasecheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ttlkit/ttlkit/lease"
)

func TestViews(t *testing.T) {
	t0 := time.Date(2025, 12, 31, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(id, holder string, cost int, token uint64, grantedMS int) lease.Lease {
		g := at(grantedMS)
		return lease.Lease{ID: id, Holder: holder, Cost: cost, Token: token, CreatedAt: g, HeartbeatAt: g,
			ExpiresAt: g.Add(time.Minute), Grace: time.Second}
	}

	v := NewViews()
	v.Granted(mk("a", "alice", 2, 1, 0), at(0), at(1))
	v.Granted(mk("b", "bob", 1, 2, 10), at(10), at(11))
	v.Heartbeat("a", at(900), time.Second) // alice trusts until 1.9 s
	v.Lost("b", at(500))                   // bob released
	v.Granted(mk("c", "carol", 1, 3, 600), at(600), at(601))
	assert.Empty(t, v.violations(3, true))
	assert.Len(t, v.violations(2, true), 2, "a and b, then a and c: 3 units")

	// A store that came back empty grants again before alice's lease
	// lapsed: over the budget, two leases for alice, a token from 1 again
	// (issued twice, and not above 3).
	v.Granted(mk("d", "alice", 2, 1, 1500), at(1500), at(1501))
	errs := v.violations(4, true)
	assert.Len(t, errs, 4, "%v", errs)

	// A heartbeat sent after the local deadline revives nothing.
	w := NewViews()
	w.Granted(mk("e", "erin", 1, 5, 0), at(0), at(1))
	w.Heartbeat("e", at(1000), time.Second)
	w.Granted(mk("f", "erin", 1, 6, 1200), at(1200), at(1201))
	assert.Empty(t, w.violations(1, true))
}
