package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Group holds one Pool per key, each with its own Options, created by Start or on
// first use. It is safe for concurrent use.
type Group[K comparable, T any] struct {
	newPool func(key K) (Provisioner[T], Options, error)

	mu     sync.Mutex
	pools  map[K]*Pool[T]
	closed bool
}

// NewGroup returns a Group making key's pool from newPool(key), whose Options must
// set MaxSize (no default).
func NewGroup[K comparable, T any](newPool func(key K) (Provisioner[T], Options, error)) (*Group[K, T], error) {
	if newPool == nil {
		return nil, errs.Invalid(ErrInvalid, "pool: NewGroup: newPool is nil")
	}
	return &Group[K, T]{newPool: newPool, pools: map[K]*Pool[T]{}}, nil
}

// Start creates keys' missing pools and waits until their [Options.CleanupOnStart]
// ends or ctx does; errors name their key.
func (g *Group[K, T]) Start(ctx context.Context, keys ...K) error {
	var errs []error
	started := make(map[K]*Pool[T], len(keys))
	for _, k := range keys {
		p, err := g.Pool(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		started[k] = p
	}
	for k, p := range started {
		select {
		case <-p.cleanupDone:
			if p.cleanupErr != nil {
				errs = append(errs, fmt.Errorf("pool: group key %v: start-up cleanup: %w", k, p.cleanupErr))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("pool: group key %v: start-up cleanup: %w", k, context.Cause(ctx)))
		}
	}
	return errors.Join(errs...)
}

// Pool returns the pool for key, creating it on first use.
func (g *Group[K, T]) Pool(key K) (*Pool[T], error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	if p, ok := g.pools[key]; ok {
		return p, nil
	}
	prov, o, err := g.newPool(key)
	if err != nil {
		return nil, fmt.Errorf("pool: group key %v: %w", key, err)
	}
	if o.MaxSize == 0 {
		return nil, errs.Invalid(ErrInvalid, "pool: group key %v: MaxSize is 0: each key's Options must set its capacity", key)
	}
	p, err := New(prov, o)
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			// The same message, naming the key; New's own is the whole text.
			return nil, errs.Invalid(ErrInvalid, "pool: group key %v: %v", key, err)
		}
		return nil, fmt.Errorf("pool: group key %v: %w", key, err)
	}
	g.pools[key] = p
	return p, nil
}

// Stats returns a snapshot of every pool's Stats.
func (g *Group[K, T]) Stats() map[K]Stats {
	out := map[K]Stats{}
	for k, p := range g.snapshot() {
		out[k] = p.Stats()
	}
	return out
}

func (g *Group[K, T]) snapshot() map[K]*Pool[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := make(map[K]*Pool[T], len(g.pools))
	for k, p := range g.pools {
		m[k] = p
	}
	return m
}

// each runs fn on every pool at once and returns the errors joined, each
// naming its key; ErrClosed is left out.
func (g *Group[K, T]) each(fn func(p *Pool[T]) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for k, p := range g.snapshot() {
		wg.Go(func() {
			if err := fn(p); err != nil && !errors.Is(err, ErrClosed) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("pool: group key %v: %w", k, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close, idempotent, closes every pool at once ([Pool.Close]), naming the key in
// each error; new keys then get [ErrClosed].
func (g *Group[K, T]) Close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	return g.each(func(p *Pool[T]) error { return p.Close(ctx) })
}
