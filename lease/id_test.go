package lease

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newID: 32 lower-case hex digits (128 bits), distinct, with every digit
// position random.
func TestNewID(t *testing.T) {
	const n = 2000
	seen := make(map[string]bool, n)
	var digits [32]map[byte]bool
	for i := range digits {
		digits[i] = map[byte]bool{}
	}
	for range n {
		id := newID()
		require.Len(t, id, 32)
		b, err := hex.DecodeString(id)
		require.NoError(t, err)
		require.Equal(t, hex.EncodeToString(b), id, "lower-case hex")
		require.False(t, seen[id], "repeated id %s", id)
		seen[id] = true
		for i := range id {
			digits[i][id[i]] = true
		}
	}
	for i, d := range digits {
		assert.Len(t, d, 16, "digit %d takes %d values in %d ids", i, len(d), n)
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = newID()
	}
}
