package testenv

import (
	"sync/atomic"
	"testing"
	"time"
)

// SchedDelay measures how late this process's goroutines run: it sleeps
// 10 ms again and again until the test ends, and the func it returns gives
// the most any sleep overran so far. A test whose promise is "at most this
// late" stretches its bound by it (a loaded machine delays every timer),
// and says by how much; a promise of "never early" needs no such stretch.
func SchedDelay(t testing.TB) func() time.Duration {
	var worst atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		const period = 10 * time.Millisecond
		for {
			start := time.Now()
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
			if d := int64(time.Since(start) - period); d > worst.Load() {
				worst.Store(d)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() time.Duration { return time.Duration(worst.Load()) }
}
