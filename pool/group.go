package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// GroupOptions configures a Group. The zero value is usable.
type GroupOptions struct {
	// JanitorInterval is how often the group's one janitor runs Tick on
	// every pool. Zero means DefaultJanitorInterval; negative starts no
	// janitor. The pools' own Options.JanitorInterval is ignored.
	JanitorInterval time.Duration
	// HealthCheckInterval is how often the janitor runs CheckHealth on
	// every pool. Zero means DefaultHealthInterval; negative disables it.
	HealthCheckInterval time.Duration
	// Clock is the janitor's time source, and the pools' when their Options
	// leave Clock nil; nil means real time.
	Clock clock.Clock
}

// Group holds one Pool per key — one per function in a serverless gateway —
// created on first use with per-key options, and one janitor for all of
// them. All methods are safe for concurrent use.
type Group[K comparable, T any] struct {
	newPool func(key K) (Provisioner[T], Options, error)
	opts    GroupOptions

	mu     sync.Mutex
	pools  map[K]*Pool[T]
	closed bool

	ctx       context.Context // the janitor's; cancelled by Close
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error
}

// NewGroup returns a Group whose pool for key is made, on first use, from
// the Provisioner and Options newPool returns for it (seed 001: MaxSize from
// the function's ReservedConcurrentExecutions). It starts the janitor;
// Close stops it.
func NewGroup[K comparable, T any](newPool func(key K) (Provisioner[T], Options, error), opts GroupOptions) (*Group[K, T], error) {
	if newPool == nil {
		return nil, errors.New("pool: NewGroup: newPool is nil")
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.JanitorInterval == 0 {
		opts.JanitorInterval = DefaultJanitorInterval
	}
	if opts.HealthCheckInterval == 0 {
		opts.HealthCheckInterval = DefaultHealthInterval
	}
	g := &Group[K, T]{newPool: newPool, opts: opts, pools: map[K]*Pool[T]{}, closeDone: make(chan struct{})}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if opts.JanitorInterval > 0 {
		g.done = make(chan struct{})
		go g.janitor()
	}
	return g, nil
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
	if o.Clock == nil {
		o.Clock = g.opts.Clock
	}
	p, err := newPool(prov, o, false)
	if err != nil {
		return nil, fmt.Errorf("pool: group key %v: %w", key, err)
	}
	g.pools[key] = p
	return p, nil
}

// Acquire acquires an item from the pool for key; see Pool.Acquire.
func (g *Group[K, T]) Acquire(ctx context.Context, key K) (*Handle[T], error) {
	p, err := g.Pool(key)
	if err != nil {
		return nil, err
	}
	return p.Acquire(ctx)
}

// Keys returns the keys that have a pool.
func (g *Group[K, T]) Keys() []K {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := make([]K, 0, len(g.pools))
	for k := range g.pools {
		keys = append(keys, k)
	}
	return keys
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

// Tick runs one janitor pass (Pool.Tick) on every pool and returns the
// errors joined.
func (g *Group[K, T]) Tick(ctx context.Context) error {
	var errs []error
	for k, p := range g.snapshot() {
		if err := p.Tick(ctx); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("pool: group key %v: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// CheckHealth runs Pool.CheckHealth on every pool.
func (g *Group[K, T]) CheckHealth(ctx context.Context) error {
	var errs []error
	for k, p := range g.snapshot() {
		if err := p.CheckHealth(ctx); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("pool: group key %v: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

func (g *Group[K, T]) janitor() {
	defer close(g.done)
	ctx := g.ctx
	t := g.opts.Clock.Ticker(g.opts.JanitorInterval)
	defer t.Stop()
	var health <-chan time.Time
	if g.opts.HealthCheckInterval > 0 {
		ht := g.opts.Clock.Ticker(g.opts.HealthCheckInterval)
		defer ht.Stop()
		health = ht.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = g.Tick(ctx)
		case <-health:
			_ = g.CheckHealth(ctx)
		}
	}
}

// Close stops the janitor and closes every pool concurrently (see
// Pool.Close), returning their errors joined. New keys fail with ErrClosed.
// Close is idempotent.
func (g *Group[K, T]) Close(ctx context.Context) error {
	first := false
	g.closeOnce.Do(func() { first = true })
	if !first {
		select {
		case <-g.closeDone:
			return g.closeErr
		case <-ctx.Done():
			return fmt.Errorf("pool: close: %w", context.Cause(ctx))
		}
	}
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	if g.done != nil {
		<-g.done
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for k, p := range g.snapshot() {
		wg.Go(func() {
			if err := p.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("pool: group key %v: %w", k, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	g.closeErr = errors.Join(errs...)
	close(g.closeDone)
	return g.closeErr
}
