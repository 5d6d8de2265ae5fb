package pool

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// callTimeout runs fn on its own goroutine under a context derived from
// parent with timeout d, recovering panics, and returns when fn does or the
// context ends, whichever is first. A fn that ignores its context keeps
// running, tracked by p.wg: abandoned, if set, runs when the caller gives up
// on it, and late, if set, receives what fn returns after that (never
// before abandoned has returned).
func callTimeout[T, R any](p *Pool[T], parent context.Context, d time.Duration, op string, fn func(context.Context) (R, error), abandoned func(), late func(R, error)) (R, error) {
	ctx, cancel := p.clock.WithTimeout(parent, d)
	defer cancel()
	type result struct {
		v   R
		err error
	}
	ch := make(chan result, 1)
	var mu sync.Mutex
	state := 0 // 0 running, 1 delivered, 2 abandoned
	p.wg.Add(1)
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[op]++
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			p.calls[op]--
			p.mu.Unlock()
		}()
		var r result
		func() {
			defer func() {
				if x := recover(); x != nil {
					r.err = &PanicError{Op: op, Value: x}
				}
			}()
			r.v, r.err = fn(ctx)
		}()
		mu.Lock()
		if state == 0 {
			state = 1
			mu.Unlock()
			ch <- r
			return
		}
		mu.Unlock()
		if late != nil {
			late(r.v, r.err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		mu.Lock()
		if state == 0 {
			state = 2
			if abandoned != nil {
				abandoned()
			}
			mu.Unlock()
			var zero R
			return zero, fmt.Errorf("pool: %s: %w", op, context.Cause(ctx))
		}
		mu.Unlock()
		r := <-ch
		return r.v, r.err
	}
}
