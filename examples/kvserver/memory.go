package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// bigValue is the size from which a deleted value counts toward giving
// memory back to the operating system.
const bigValue = 1 << 20

// returnThreshold is how many bytes of large values deleted make the
// memory returner act.
const returnThreshold = 16 << 20

// freed records the deletion of a value of n bytes.
func (s *Server) freed(n int) {
	if n >= bigValue {
		s.bigFreed.Add(int64(n))
	}
}

// returnMemory gives the memory of deleted large values back to the
// operating system, at most once a second. Go's collector would free it
// only at the next collection, which a quiet server may not reach for a
// long time, and its scavenger returns free pages slowly; a value of
// hundreds of megabytes should not stay resident after DEL.
func (s *Server) returnMemory() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if s.bigFreed.Load() >= returnThreshold {
			s.bigFreed.Store(0)
			debug.FreeOSMemory()
		}
	}
}

// activeExpire runs an active-expiry cycle on every database each
// Interval, as each expiry.Map would on its own goroutine: while a cycle
// ends on its budget, the next follows after a pause as long as the cycle
// (unless NoCatchUp), so a mass expiry gets up to half a processor.
func (s *Server) activeExpire() {
	defer s.wg.Done()
	// A cycle is bounded by its budget, so Close waits at most that long.
	ctx := context.Background()
	t := time.NewTicker(time.Duration(s.interval.Load()))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.intervalChanged:
			t.Reset(time.Duration(s.interval.Load()))
			continue
		case <-t.C:
		}
		for _, db := range s.dbs {
			for !s.activeOff.Load() {
				r, err := db.Cycle(ctx)
				if err != nil || !r.BudgetHit || s.cfg.Expiry.NoCatchUp {
					break
				}
				select {
				case <-s.stop:
					return
				case <-time.After(max(r.Duration, time.Millisecond)):
				}
			}
		}
	}
}

var memSamples = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
}

// memoryUse returns the bytes of live and not yet collected objects (INFO
// used_memory) and the resident set size (used_memory_rss): from
// /proc/self/statm where there is one, else what the Go runtime holds from
// the operating system.
func memoryUse() (heap, rss uint64) {
	s := make([]metrics.Sample, len(memSamples))
	copy(s, memSamples)
	metrics.Read(s)
	heap = s[0].Value.Uint64()
	rss = s[1].Value.Uint64() - s[2].Value.Uint64()
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				rss = pages * uint64(os.Getpagesize())
			}
		}
	}
	return heap, rss
}
