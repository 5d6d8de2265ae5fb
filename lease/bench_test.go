package lease_test

import (
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// The parts of a grant on the memory store: the id, and the store's grant
// and release without a Manager. The side-by-side benchmarks against peers
// are in bench/lease.

func BenchmarkMemoryStoreGrantRelease(b *testing.B) {
	b.ReportAllocs()
	s := lease.NewMemoryStore(nil)
	a := lease.GrantArgs{ID: "0f1e2d3c4b5a69788796a5b4c3d2e1f0", Holder: "session-1", Costs: []int{2, 1}, TTL: time.Minute,
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
