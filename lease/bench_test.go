package lease_test

import (
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// The parts of a grant on the memory store: the id, and the store's grant
// and release without a Manager. The side-by-side benchmarks against peers
// are in bench/lease.

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = lease.NewID()
	}
}

func BenchmarkMemoryStoreGrantRelease(b *testing.B) {
	b.ReportAllocs()
	s := lease.NewMemoryStore(nil)
	a := lease.GrantArgs{ID: lease.NewID(), Holder: "session-1", Costs: []int{2, 1}, TTL: time.Minute,
		Grace: time.Minute, Budget: 35, OnePerHolder: true}
	for b.Loop() {
		l, err := s.Grant(ctx, a)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(ctx, l.ID, ""); err != nil {
			b.Fatal(err)
		}
	}
}
