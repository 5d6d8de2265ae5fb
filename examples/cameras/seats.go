package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ttlkit/ttlkit/lease"
)

// seatGrace is how long a UI user keeps its seat without a status poll or
// a heartbeat of its suggest stream: the page polls every 5 s, so three
// polls in a row must fail before its seat is free for another user.
const seatGrace = activeWindow

// seatResource is the resource of every seat lease.
const seatResource = "suggest"

// errSeatsFull: MAX_UI_USERS users already hold a seat.
var errSeatsFull = errors.New("cameras: every UI user seat is taken")

// Seats caps the UI users, and so the suggest streams, at MAX_UI_USERS
// across every instance that shares the store. The design reserves
// MAX_UI_USERS × 1 units for one suggest sub stream per UI user (§2.2); a
// UI user holds a seat, a lease of SUB_STREAM_COST units on a budget of
// those units, granted and heartbeated by the page's status polls (and by
// its suggest stream while it plays), released when the page goes away and
// lapsed seatGrace after the page stopped asking. A session holds one seat
// at a time, whatever the number of its tabs. The suggest stream is served
// only to a seat's holder and ends with the seat, so the streams really
// served never exceed the units reserved for them.
type Seats struct {
	m    *lease.Manager // nil when the reserve seats nobody
	cost int
	max  int
}

// NewSeats returns the seats of cfg in store (nil: in memory, for this
// instance only); onEvent receives the seat leases' events.
func NewSeats(cfg Config, store lease.Store, onEvent func(lease.Event), log *slog.Logger) (*Seats, error) {
	s := &Seats{cost: cfg.SubStreamCost, max: cfg.MaxSeats()}
	if s.max == 0 {
		return s, nil
	}
	var err error
	s.m, err = lease.New(cfg.ReservedSuggestUnits(), lease.Options{
		Store:         store,
		TTL:           cfg.SessionTTL,
		Grace:         seatGrace,
		SweepInterval: cfg.CleanupInterval,
		OnEvent:       onEvent,
		Logger:        log,
	})
	if err != nil {
		return nil, fmt.Errorf("UI user seats: %w", err)
	}
	return s, nil
}

// Max is how many UI users can hold a seat at once.
func (s *Seats) Max() int { return s.max }

// Take heartbeats holder's seat and returns it: the seat id when holder
// holds it, else the seat holder already has (granted through another tab
// or instance), else a new one. When every seat is taken it returns an
// error matching errSeatsFull.
func (s *Seats) Take(ctx context.Context, holder, id string) (lease.Lease, error) {
	if s.m == nil {
		return lease.Lease{}, errSeatsFull
	}
	if id != "" {
		if hb, err := s.m.Heartbeat(ctx, id, holder); err == nil {
			return hb.Lease, nil
		}
	}
	l, err := s.m.Grant(ctx, lease.Request{Holder: holder, Resource: seatResource, Cost: s.cost})
	var rej *lease.RejectedError
	switch {
	case err == nil:
		return l, nil
	case errors.As(err, &rej) && rej.Err == lease.ErrHolderHasLease:
		hb, err := s.m.Heartbeat(ctx, rej.Existing, holder)
		return hb.Lease, err
	case errors.Is(err, lease.ErrOverCapacity):
		return lease.Lease{}, errors.Join(errSeatsFull, err)
	}
	return lease.Lease{}, err
}

// Leave gives holder's seat id back at once. A seat that is already gone
// or another's is no error: there is nothing to give back.
func (s *Seats) Leave(ctx context.Context, holder, id string) error {
	if s.m == nil {
		return nil
	}
	_, err := s.m.Release(ctx, id, holder)
	if errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrExpired) || errors.Is(err, lease.ErrWrongHolder) {
		return nil
	}
	return err
}

// KeepAlive heartbeats seat l while its suggest stream plays.
func (s *Seats) KeepAlive(ctx context.Context, l lease.Lease) *lease.KeepAlive {
	return s.m.KeepAlive(ctx, l, seatGrace/3)
}

// Users returns how many UI users hold a seat, on every instance.
func (s *Seats) Users(ctx context.Context) (int, error) {
	if s.m == nil {
		return 0, nil
	}
	_, n, err := s.m.Usage(ctx)
	return n, err
}

// Stats returns the seat Manager's stats (zero when nobody can be seated).
func (s *Seats) Stats() lease.Stats {
	if s.m == nil {
		return lease.Stats{}
	}
	return s.m.Stats()
}

// Close stops the seats' cleanup loop. The seats stay in the store and
// lapse when their pages stop asking.
func (s *Seats) Close(ctx context.Context) error {
	if s == nil || s.m == nil {
		return nil
	}
	return s.m.Close(ctx)
}
