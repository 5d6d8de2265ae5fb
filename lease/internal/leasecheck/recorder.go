package leasecheck

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ttlkit/ttlkit/lease"
)

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
	kind   opKind
	now    time.Time
	args   lease.GrantArgs // grant
	id     string          // heartbeat, release, get
	holder string          // heartbeat, release: "" or the holder checked
	limit  int             // sweep
}

type outcome int

const (
	ok outcome = iota
	rejected
	invalid
	expired
	notFound
	ambiguous
	wrongHolder
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
	case errors.Is(err, lease.ErrNotApplied):
		return // certainly changed nothing
	case errors.Is(err, lease.ErrInvalid):
		out.outcome = invalid
	case errors.Is(err, lease.ErrWrongHolder):
		out.outcome = wrongHolder
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
func (r *recorder) Heartbeat(ctx context.Context, id, holder string) (l lease.Lease, err error) {
	r.record(input{kind: opHeartbeat, id: id, holder: holder}, func() (output, error) {
		l, err = r.s.Heartbeat(ctx, id, holder)
		return output{lease: l}, err
	})
	return l, err
}

// Release implements lease.Store: it calls the wrapped store and records the call.
func (r *recorder) Release(ctx context.Context, id, holder string) (l lease.Lease, err error) {
	r.record(input{kind: opRelease, id: id, holder: holder}, func() (output, error) {
		l, err = r.s.Release(ctx, id, holder)
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
