package pool_test

import (
	"testing"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/pooltest"
)

func TestMemoryInventory(t *testing.T) {
	t.Parallel()
	pooltest.Run(t, pooltest.Harness{
		Open: func(t *testing.T, n int) []pool.Inventory {
			inv := pool.NewMemoryInventory(nil)
			out := make([]pool.Inventory, n)
			for i := range out {
				out[i] = inv
			}
			return out
		},
	})
}
