// Package leasecheck records the operations that clients run on lease
// Stores and checks that the history is linearizable against a sequential
// model of the Store contract (with github.com/anishathalye/porcupine). The
// model knows every rule: decision order, fallback costs, strictly
// increasing tokens, liveness, heartbeats, sweeps. So a linearizable history
// also never oversubscribed the budget nor gave a holder two live leases.
//
// Time: with a now function (a memory store in a synctest bubble, where an
// operation runs at the instant it is called) the model applies expiry
// exactly. Without one (a server store, whose clock the client cannot read)
// the model treats every lease as live, so the run must use TTLs and graces
// longer than the run and expects sweeps to find nothing.
//
// Calls that fail with a transport error (neither a rule outcome nor a
// context error before sending) are recorded as ambiguous: they may or may
// not have taken effect, at any time after their call.
package leasecheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ttlkit/ttlkit/lease"
)

// History collects operations from any number of recording stores.
type History struct {
	// Dir is where Verify writes the visualization of a failed check;
	// empty means os.TempDir().
	Dir string

	now func() time.Time
	seq atomic.Int64

	mu  sync.Mutex
	ops []porcupine.Operation
}

// New returns an empty history. now, if not nil, gives the store's time at
// which an operation runs (time.Now in a synctest bubble); nil means time is
// not modelled.
func New(now func() time.Time) *History { return &History{now: now} }

// Len returns the number of recorded operations.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Store returns s wrapped so that every call is recorded under client id
// client. Use one wrapper per Manager or goroutine.
func (h *History) Store(client int, s lease.Store) lease.Store {
	return &recorder{h: h, client: client, s: s}
}

type opKind int

const (
	opGrant opKind = iota
	opHeartbeat
	opRelease
	opGet
	opList
	opUsage
	opSweep
)

var opNames = [...]string{"grant", "heartbeat", "release", "get", "list", "usage", "sweep"}

type input struct {
	kind  opKind
	now   time.Time
	args  lease.GrantArgs // grant
	id    string          // heartbeat, release, get
	limit int             // sweep
}

type outcome int

const (
	ok outcome = iota
	rejected
	invalid
	expired
	notFound
	ambiguous
)

type output struct {
	outcome outcome
	lease   lease.Lease // grant, heartbeat, release, get
	rej     lease.RejectedError
	leases  []lease.Lease // list, sweep
	units   int
	count   int
}

type recorder struct {
	h      *History
	client int
	s      lease.Store
}

func (r *recorder) record(in input, call func() (output, error)) {
	if r.h.now != nil {
		in.now = r.h.now()
	}
	start := r.h.seq.Add(1)
	out, err := call()
	end := r.h.seq.Add(1)
	var re *lease.RejectedError
	switch {
	case err == nil:
	case errors.As(err, &re):
		out.outcome, out.rej = rejected, *re
	case errors.Is(err, lease.ErrInvalid):
		out.outcome = invalid
	case errors.Is(err, lease.ErrExpired):
		out.outcome = expired
	case errors.Is(err, lease.ErrNotFound):
		out.outcome = notFound
	default:
		if in.kind == opGet || in.kind == opList || in.kind == opUsage {
			return // a failed read changes nothing
		}
		out.outcome, end = ambiguous, math.MaxInt64
	}
	r.h.mu.Lock()
	r.h.ops = append(r.h.ops, porcupine.Operation{ClientId: r.client, Input: in, Call: start, Output: out, Return: end})
	r.h.mu.Unlock()
}

// Grant implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) Grant(ctx context.Context, a lease.GrantArgs) (l lease.Lease, err error) {
	a.Costs = slices.Clone(a.Costs)
	r.record(input{kind: opGrant, args: a}, func() (output, error) {
		l, err = r.s.Grant(ctx, a)
		return output{lease: l}, err
	})
	return l, err
}

// Heartbeat implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) Heartbeat(ctx context.Context, id string) (l lease.Lease, err error) {
	r.record(input{kind: opHeartbeat, id: id}, func() (output, error) {
		l, err = r.s.Heartbeat(ctx, id)
		return output{lease: l}, err
	})
	return l, err
}

// Release implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) Release(ctx context.Context, id string) (l lease.Lease, err error) {
	r.record(input{kind: opRelease, id: id}, func() (output, error) {
		l, err = r.s.Release(ctx, id)
		return output{lease: l}, err
	})
	return l, err
}

// Get implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) Get(ctx context.Context, id string) (l lease.Lease, err error) {
	r.record(input{kind: opGet, id: id}, func() (output, error) {
		l, err = r.s.Get(ctx, id)
		return output{lease: l}, err
	})
	return l, err
}

// List implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) List(ctx context.Context) (ls []lease.Lease, err error) {
	r.record(input{kind: opList}, func() (output, error) {
		ls, err = r.s.List(ctx)
		return output{leases: ls}, err
	})
	return ls, err
}

// Usage implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) Usage(ctx context.Context) (units, n int, err error) {
	r.record(input{kind: opUsage}, func() (output, error) {
		units, n, err = r.s.Usage(ctx)
		return output{units: units, count: n}, err
	})
	return units, n, err
}

// Sweep implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) Sweep(ctx context.Context, limit int) (ls []lease.Lease, err error) {
	r.record(input{kind: opSweep, limit: limit}, func() (output, error) {
		ls, err = r.s.Sweep(ctx, limit)
		return output{leases: ls}, err
	})
	return ls, err
}

// ErrInconclusive is returned by Verify when the check timed out.
var ErrInconclusive = errors.New("leasecheck: check timed out: inconclusive")

// Verify checks that the history recorded so far is linearizable. It
// returns nil if it is, ErrInconclusive if the check ran out of time, and
// otherwise an error naming a temporary HTML file that visualizes the
// history.
func (h *History) Verify(timeout time.Duration) error {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	model := Model()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return ErrInconclusive
	}
	f, err := os.CreateTemp(h.Dir, "leasecheck-*.html")
	where := "(no visualization)"
	if err == nil {
		where = f.Name()
		if err := porcupine.Visualize(model, info, f); err != nil {
			where += " (incomplete: " + err.Error() + ")"
		}
		_ = f.Close()
	}
	return fmt.Errorf("leasecheck: history of %d operations is not linearizable; visualization: %s", len(ops), where)
}

// Check runs Verify and fails t if the history is not linearizable. A check
// that times out is inconclusive and only logged.
func (h *History) Check(t testing.TB, timeout time.Duration) {
	t.Helper()
	switch err := h.Verify(timeout); {
	case err == nil:
		t.Logf("leasecheck: %d operations linearizable", h.Len())
	case errors.Is(err, ErrInconclusive):
		t.Logf("%v (%d operations)", err, h.Len())
	default:
		t.Error(err)
	}
}

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

func live(l lease.Lease, now time.Time) bool { return now.IsZero() || l.Live(now) }

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
		res = fmt.Sprintf("%s avail %d %s", o.rej.Reason, o.rej.Available, short(o.rej.Existing))
	default:
		res = [...]string{"", "", "invalid", "expired", "not found", "ambiguous"}[o.outcome]
	}
	return fmt.Sprintf("%s(%s) → %s", opNames[i.kind], arg, res)
}

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
	var reason lease.Reason
	cost := 0
	switch {
	case a.Overloaded:
		reason = lease.ReasonOverloaded
	case a.OnePerHolder && (len(holderLeases) > 0 || holderPhantom):
		reason = lease.ReasonHolderHasLease
	default:
		for _, c := range a.Costs {
			if c <= available {
				cost = c
				break
			}
		}
		if cost == 0 {
			reason = lease.ReasonOverCapacity
		}
	}
	switch out.outcome {
	case rejected:
		r := out.rej
		if r.Reason != reason || r.Available != available {
			return nil
		}
		if reason == lease.ReasonHolderHasLease {
			if _, known := s.find(r.Existing); !slices.Contains(holderLeases, r.Existing) && (known || !holderPhantom) {
				return nil
			}
		} else if r.Existing != "" {
			return nil
		}
		return []any{s}
	case ok:
		l := out.lease
		if reason != "" || l.Cost != cost || l.ID != a.ID || l.Holder != a.Holder || l.Resource != a.Resource ||
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
		if reason != "" {
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
