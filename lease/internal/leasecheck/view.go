package leasecheck

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// Views records what clients believe they hold, on their own clock, and
// checks the promises a store makes to them even when it fails or loses
// its state: at no instant do the leases that clients trust hold more than
// the budget, or two for one holder, and every acknowledged token is
// greater than every token acknowledged before its grant was sent.
//
// A client trusts a lease from the moment its grant is acknowledged until
// its local deadline: the moment it sent the grant, or the last
// acknowledged heartbeat sent before the deadline then in force, plus the
// remaining time the store returned (what KeepAlive does). It stops
// trusting it earlier when it calls Release, or when a heartbeat returns
// that the lease is gone.
//
// Unlike History, Views needs no model of the store: it checks what any
// store must never let clients see, so it holds across a store that comes
// back empty, where a linearizability check cannot.
type Views struct {
	mu     sync.Mutex
	leases map[string]*view // by lease id
	order  []*view          // in grant order
}

type view struct {
	l          lease.Lease
	sent, ack  time.Time // the grant's call and acknowledgement
	start, end time.Time // trusted on [start, end)
}

// NewViews returns an empty record.
func NewViews() *Views { return &Views{leases: map[string]*view{}} }

// Granted records a grant sent at sent and acknowledged at ack.
func (v *Views) Granted(l lease.Lease, sent, ack time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w := &view{l: l, sent: sent, ack: ack, start: ack, end: sent.Add(max(l.Deadline().Sub(l.HeartbeatAt), 0))}
	v.leases[l.ID] = w
	v.order = append(v.order, w)
}

// Heartbeat records a successful heartbeat of lease id sent at sent that
// returned remaining. A heartbeat sent after the local deadline revives
// nothing (KeepAlive gives the lease up at the deadline).
func (v *Views) Heartbeat(id string, sent time.Time, remaining time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if w := v.leases[id]; w != nil && sent.Before(w.end) {
		w.end = later(w.end, sent.Add(remaining))
	}
}

// Lost records that the client stopped trusting lease id at at: it called
// Release, or a heartbeat told it that the lease is gone.
func (v *Views) Lost(id string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if w := v.leases[id]; w != nil && at.Before(w.end) {
		w.end = at
	}
}

// Len returns the number of grants recorded.
func (v *Views) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.order)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Check fails t for every instant at which the trusted leases exceed
// budget or give a holder two leases (when onePerHolder), for every token
// acknowledged twice, and for every token not greater than one
// acknowledged before its grant was sent.
func (v *Views) Check(t testing.TB, budget int, onePerHolder bool) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, err := range v.violations(budget, onePerHolder) {
		t.Error(err)
	}
}

func (v *Views) violations(budget int, onePerHolder bool) []error {
	type edge struct {
		at    time.Time
		start bool
		w     *view
	}
	var edges []edge
	for _, w := range v.order {
		if w.start.Before(w.end) {
			edges = append(edges, edge{w.start, true, w}, edge{w.end, false, w})
		}
	}
	// Ends before starts at the same instant: [start, end) intervals.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.start == b.start:
			return 0
		case a.start:
			return 1
		}
		return -1
	})
	var (
		errs    []error
		units   int
		holders = map[string]int{}
	)
	const maxErrs = 10
	for _, e := range edges {
		if !e.start {
			units -= e.w.l.Cost
			holders[e.w.l.Holder]--
			continue
		}
		units += e.w.l.Cost
		holders[e.w.l.Holder]++
		if units > budget && len(errs) < maxErrs {
			errs = append(errs, fmt.Errorf("leasecheck: at %s clients trust %d units, budget %d (lease %s of %s, cost %d, token %d)",
				e.at.Format(time.StampMicro), units, budget, short(e.w.l.ID), e.w.l.Holder, e.w.l.Cost, e.w.l.Token))
		}
		if onePerHolder && holders[e.w.l.Holder] > 1 && len(errs) < maxErrs {
			errs = append(errs, fmt.Errorf("leasecheck: at %s holder %s trusts %d leases (lease %s, token %d)",
				e.at.Format(time.StampMicro), e.w.l.Holder, holders[e.w.l.Holder], short(e.w.l.ID), e.w.l.Token))
		}
	}
	// Tokens: never two grants with one token, and each greater than every
	// token acknowledged before its grant was sent.
	seen := map[uint64]*view{}
	for _, w := range v.order {
		if o := seen[w.l.Token]; o != nil && len(errs) < 2*maxErrs {
			errs = append(errs, fmt.Errorf("leasecheck: token %d was issued twice: leases %s and %s",
				w.l.Token, short(o.l.ID), short(w.l.ID)))
		}
		seen[w.l.Token] = w
	}
	byAck := slices.Clone(v.order)
	slices.SortFunc(byAck, func(a, b *view) int { return a.ack.Compare(b.ack) })
	bySent := slices.Clone(v.order)
	slices.SortFunc(bySent, func(a, b *view) int { return a.sent.Compare(b.sent) })
	var maxTok uint64
	var maxOf *view
	i := 0
	for _, w := range bySent {
		for ; i < len(byAck) && byAck[i].ack.Before(w.sent); i++ {
			if byAck[i].l.Token > maxTok {
				maxTok, maxOf = byAck[i].l.Token, byAck[i]
			}
		}
		if maxOf != nil && w.l.Token <= maxTok && len(errs) < 2*maxErrs {
			errs = append(errs, fmt.Errorf("leasecheck: token %d of lease %s (sent %s) is not above token %d acknowledged at %s",
				w.l.Token, short(w.l.ID), w.sent.Format(time.StampMicro), maxTok, maxOf.ack.Format(time.StampMicro)))
		}
	}
	return errs
}
