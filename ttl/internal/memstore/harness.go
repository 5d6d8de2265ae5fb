package memstore

import (
	"context"
	"errors"
	"testing"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

// Harness returns the ttltest.StoreHarness of the stores New(opts) makes.
func Harness(opts Options) ttltest.StoreHarness {
	return ttltest.StoreHarness{
		New: func(*testing.T) ttl.Store { return New(opts) },
		Create: func(t *testing.T, st ttl.Store, es ...ttltest.Entity) {
			t.Helper()
			in := make([]Entity, len(es))
			for i, e := range es {
				in[i] = Entity(e)
			}
			if _, err := st.(*Store).CreateMany(context.Background(), in); err != nil {
				t.Fatalf("CreateMany: %v", err)
			}
		},
		Get: func(t *testing.T, st ttl.Store, id string) (ttltest.Entity, bool) {
			t.Helper()
			e, err := st.(*Store).Get(context.Background(), id)
			if errors.Is(err, ErrNotFound) {
				return ttltest.Entity{}, false
			}
			if err != nil {
				t.Fatalf("Get(%q): %v", id, err)
			}
			return ttltest.Entity(e), true
		},
	}
}
