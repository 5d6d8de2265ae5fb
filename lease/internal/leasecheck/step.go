package leasecheck

import (
	"slices"
	"strings"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// step returns the states the store may be in after the operation, or none
// if the output is impossible in s.
func step(s state, in input, out output) []any {
	now := in.now
	one := func(ns state) []any { return []any{ns} }
	switch in.kind {
	case opGrant:
		return stepGrant(s, in, out)
	case opHeartbeat, opRelease, opGet:
		i, found := s.find(in.id)
		isLive := found && live(s.leases[i], now)
		if found && in.holder != "" && s.leases[i].Holder != in.holder {
			// Another holder's lease, live or expired: refused, unchanged.
			if out.outcome == wrongHolder || out.outcome == ambiguous {
				return one(s)
			}
			return nil
		}
		switch out.outcome {
		case notFound:
			if found {
				return nil
			}
			return one(s)
		case expired:
			if !found || isLive {
				return nil
			}
			return one(s)
		case ambiguous:
			if !isLive || in.kind == opGet {
				return one(s)
			}
			ns := s.clone()
			if in.kind == opRelease {
				ns.leases = slices.Delete(ns.leases, i, i+1)
			} // an untracked heartbeat time: only modelled without time
			return []any{s, ns}
		case ok:
			if !isLive {
				return nil
			}
			want := s.leases[i]
			hb := out.lease.HeartbeatAt
			switch {
			case now.IsZero():
				// Untimed: a heartbeat time is never earlier than the
				// last known one (an ambiguous heartbeat may have moved
				// it unseen).
				if !hb.Before(want.HeartbeatAt) {
					want.HeartbeatAt = hb
				}
			case in.kind == opHeartbeat && hb.Equal(now):
				want.HeartbeatAt = hb
			}
			if !sameLease(out.lease, want) {
				return nil
			}
			ns := s.clone()
			switch in.kind {
			case opHeartbeat, opGet:
				// Untimed, a Get may reveal a heartbeat time that an
				// ambiguous heartbeat set; later reads must not go back.
				ns.leases[i] = want
			case opRelease:
				ns.leases = slices.Delete(ns.leases, i, i+1)
			}
			return one(ns)
		}
		return nil
	case opUsage:
		units, n := s.usage(now)
		if out.units != units || out.count != n {
			return nil
		}
		return one(s)
	case opList:
		return stepList(s, now, out.leases)
	case opSweep:
		if out.outcome == ambiguous {
			ns := s.clone()
			ns.leases = slices.DeleteFunc(ns.leases, func(l lease.Lease) bool { return !live(l, now) })
			return []any{s, ns}
		}
		if out.outcome != ok || len(out.leases) > in.limit {
			return nil
		}
		ns := s.clone()
		for _, l := range out.leases {
			i, found := ns.find(l.ID)
			if !found || live(ns.leases[i], now) || !sameLease(ns.leases[i], l) {
				return nil
			}
			ns.leases = slices.Delete(ns.leases, i, i+1)
		}
		if len(out.leases) < in.limit {
			for _, l := range ns.leases {
				if !live(l, now) {
					return nil // an expired record was left behind
				}
			}
		}
		return one(ns)
	}
	return nil
}

// stepList accepts a List that shows exactly the live leases, by Token
// ascending. Untimed, a listed HeartbeatAt may be later than the known one (an
// ambiguous heartbeat moved it unseen). Every phantom must show up, under
// an id nobody knew: a List linearized after an ambiguous grant that took
// effect sees it; the branch where it did not take effect has no phantom.
func stepList(s state, now time.Time, got []lease.Lease) []any {
	ns := s.clone()
	known := 0
	for k, l := range got {
		if k > 0 && l.Token <= got[k-1].Token {
			return nil
		}
		i, found := ns.find(l.ID)
		if !found {
			p := slices.Index(ns.phantoms, phantom{l.Holder, l.Cost})
			if p < 0 {
				return nil
			}
			ns.phantoms = slices.Delete(ns.phantoms, p, p+1)
			ns.leases = slices.Insert(ns.leases, i, l)
			continue
		}
		cur := ns.leases[i]
		if !live(cur, now) {
			return nil
		}
		if now.IsZero() && !l.HeartbeatAt.Before(cur.HeartbeatAt) {
			cur.HeartbeatAt = l.HeartbeatAt
		}
		if !sameLease(cur, l) {
			return nil
		}
		ns.leases[i] = cur
		known++
	}
	n := 0
	for _, l := range s.leases {
		if live(l, now) {
			n++
		}
	}
	if known != n || len(ns.phantoms) > 0 {
		return nil
	}
	return []any{ns}
}

func stepGrant(s state, in input, out output) []any {
	a, now := in.args, in.now
	if a.Validate() != nil {
		if out.outcome == invalid {
			return []any{s}
		}
		return nil
	}
	used, _ := s.usage(now)
	available := max(a.Budget-used, 0)
	var holderLeases []string
	for _, l := range s.leases {
		if l.Holder == a.Holder && live(l, now) {
			holderLeases = append(holderLeases, l.ID)
		}
	}
	holderPhantom := slices.ContainsFunc(s.phantoms, func(p phantom) bool { return p.holder == a.Holder })
	var reason error
	cost := 0
	switch {
	case a.Overloaded:
		reason = lease.ErrOverloaded
	case a.OnePerHolder && (len(holderLeases) > 0 || holderPhantom):
		reason = lease.ErrHolderHasLease
	default:
		for _, c := range a.Costs {
			if c <= available {
				cost = c
				break
			}
		}
		if cost == 0 {
			reason = lease.ErrOverCapacity
		}
	}
	switch out.outcome {
	case rejected:
		r := out.rej
		if r.Err == lease.ErrRecovering {
			return []any{s} // the store's own condition, never the model's
		}
		if r.Err != reason || r.Available != available {
			return nil
		}
		if reason == lease.ErrHolderHasLease {
			if _, known := s.find(r.Existing); !slices.Contains(holderLeases, r.Existing) && (known || !holderPhantom) {
				return nil
			}
		} else if r.Existing != "" {
			return nil
		}
		return []any{s}
	case ok:
		l := out.lease
		if reason != nil || l.Cost != cost || l.ID != a.ID || l.Holder != a.Holder || l.Resource != a.Resource ||
			l.Grace != a.Grace || l.Token <= s.maxToken || !l.HeartbeatAt.Equal(l.CreatedAt) {
			return nil
		}
		if !now.IsZero() && (!l.CreatedAt.Equal(now) || !l.ExpiresAt.Equal(now.Add(a.TTL))) {
			return nil
		}
		ns := s.clone()
		ns.maxToken = l.Token
		i, _ := ns.find(l.ID)
		ns.leases = slices.Insert(ns.leases, i, l)
		return []any{ns}
	case ambiguous:
		if reason != nil {
			return []any{s}
		}
		ns := s.clone()
		ns.phantoms = append(ns.phantoms, phantom{a.Holder, cost})
		slices.SortFunc(ns.phantoms, func(x, y phantom) int {
			if c := strings.Compare(x.holder, y.holder); c != 0 {
				return c
			}
			return x.cost - y.cost
		})
		return []any{s, ns}
	}
	return nil
}
