package leasecheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ttlkit/ttlkit/lease"
)

// state is the model's sequential store: leases sorted by id, the highest
// token issued, and the leases that ambiguous grants may have added, whose
// id nobody knows (live forever: ambiguous calls happen only untimed).
type state struct {
	leases   []lease.Lease
	maxToken uint64
	phantoms []phantom
}

// phantom is a lease an ambiguous grant may have added.
type phantom struct {
	holder string
	cost   int
}

func (s state) clone() state {
	return state{leases: slices.Clone(s.leases), maxToken: s.maxToken, phantoms: slices.Clone(s.phantoms)}
}

func live(l lease.Lease, now time.Time) bool { return now.IsZero() || now.Before(l.Deadline()) }

func (s state) find(id string) (int, bool) {
	return sort.Find(len(s.leases), func(i int) int { return strings.Compare(id, s.leases[i].ID) })
}

func (s state) usage(now time.Time) (units, n int) {
	for _, l := range s.leases {
		if live(l, now) {
			units += l.Cost
			n++
		}
	}
	for _, p := range s.phantoms {
		units += p.cost
		n++
	}
	return units, n
}

// Model returns the porcupine model of the Store contract.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(st, in, out any) []any {
			return step(st.(state), in.(input), out.(output))
		},
		Equal: func(a, b any) bool {
			x, y := a.(state), b.(state)
			return x.maxToken == y.maxToken && slices.Equal(x.phantoms, y.phantoms) && slices.EqualFunc(x.leases, y.leases, sameLease)
		},
		DescribeOperation: describe,
		DescribeState: func(st any) string {
			s := st.(state)
			var b strings.Builder
			fmt.Fprintf(&b, "maxToken %d", s.maxToken)
			for _, l := range s.leases {
				fmt.Fprintf(&b, "; %s holder %s cost %d token %d deadline %s", short(l.ID), l.Holder, l.Cost, l.Token, l.Deadline().Format(time.StampMilli))
			}
			if len(s.phantoms) > 0 {
				fmt.Fprintf(&b, "; phantoms %v", s.phantoms)
			}
			return b.String()
		},
	}
	return nm.ToModel()
}

func sameLease(a, b lease.Lease) bool {
	return a.ID == b.ID && a.Holder == b.Holder && a.Resource == b.Resource && a.Cost == b.Cost &&
		a.Token == b.Token && a.Grace == b.Grace && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.HeartbeatAt.Equal(b.HeartbeatAt)
}

func short(id string) string { return id[:min(6, len(id))] }

func describe(in, out any) string {
	i, o := in.(input), out.(output)
	var arg string
	switch i.kind {
	case opGrant:
		arg = fmt.Sprintf("%s %v", i.args.Holder, i.args.Costs)
		if i.args.Overloaded {
			arg += " overloaded"
		}
	case opHeartbeat, opRelease, opGet:
		arg = short(i.id)
		if i.holder != "" {
			arg += " as " + i.holder
		}
	case opSweep:
		arg = fmt.Sprint(i.limit)
	}
	var res string
	switch o.outcome {
	case ok:
		switch i.kind {
		case opList, opSweep:
			ids := make([]string, len(o.leases))
			for k, l := range o.leases {
				ids[k] = short(l.ID)
			}
			res = fmt.Sprint(ids)
		case opUsage:
			res = fmt.Sprintf("%d units, %d leases", o.units, o.count)
		default:
			res = fmt.Sprintf("%s cost %d token %d", short(o.lease.ID), o.lease.Cost, o.lease.Token)
		}
	case rejected:
		res = fmt.Sprintf("%v avail %d %s", o.rej.Err, o.rej.Available, short(o.rej.Existing))
	default:
		res = [...]string{"", "", "invalid", "expired", "not found", "ambiguous", "wrong holder"}[o.outcome]
	}
	return fmt.Sprintf("%s(%s) → %s", opNames[i.kind], arg, res)
}
