package shared_test

import (
	"testing"

	"github.com/ttlkit/ttlkit/pool/pooltest"
	"github.com/ttlkit/ttlkit/pool/shared"
)

func TestMemoryInventory(t *testing.T) {
	t.Parallel()
	pooltest.Run(t, pooltest.Harness{
		Open: func(t *testing.T, n int) []shared.Inventory {
			inv := shared.NewMemoryInventory(nil)
			out := make([]shared.Inventory, n)
			for i := range out {
				out[i] = inv
			}
			return out
		},
	})
}
