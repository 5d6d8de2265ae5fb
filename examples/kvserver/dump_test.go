package main

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDumpPayload checks DUMP's bytes against payloads a redis-server
// 7.0.15 wrote for the same values: integers, a short string, an integer
// too large for 32 bits, and compressed strings.
func TestDumpPayload(t *testing.T) {
	for v, want := range map[string]string{
		"12345":                         "\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\b\xb9",
		"-5":                            "\x00\xc0\xfb\n\x00I\xc4\xc6\xf4\xd7&?h",
		"100":                           "\x00\xc0d\n\x00\x87)\x951`\x0e\x8d\xb3",
		"hello":                         "\x00\x05hello\n\x00cr\xdfve4 \n",
		"123456789012":                  "\x00\x0c123456789012\n\x00\x91\x10\x01\xb1\xd1\x16\xe7\xac",
		strings.Repeat("x", 50):         "\x00\xc3\t2\x01xx\xe0%\x00\x01xx\n\x00\xbc\xb8\x0b\xdd\xa0pk\xe7",
		strings.Repeat("abcdefghij", 5): "\x00\xc3\x122\nabcdefghija\xe0\x1c\t\x01ij\n\x00\xbf,X\xb7)\x1a\xaf0",
	} {
		require.Equal(t, want, string(dumpPayload(v)), "%q", v)
		p, err := verifyPayload([]byte(want))
		require.NoError(t, err)
		got, err := loadString(p)
		require.NoError(t, err)
		require.Equal(t, v, got)
	}
	require.Equal(t, uint64(0xe9c6d914c4b8d9ca), redisCRC64([]byte("123456789")), "crc64.c's own test vector")
}

// TestLZFRoundTrip compresses and expands random and repetitive strings.
func TestLZFRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		n := 21 + r.IntN(3000)
		b := make([]byte, n)
		alphabet := 1 + r.IntN(255)
		for j := range b {
			if j > 8 && r.IntN(3) == 0 {
				b[j] = b[j-1-r.IntN(8)]
			} else {
				b[j] = byte(r.IntN(alphabet))
			}
		}
		c := lzfCompress(b, n-4)
		if c == nil {
			continue
		}
		out, ok := lzfDecompress(c, uint64(n))
		require.True(t, ok, "case %d", i)
		require.Equal(t, b, out, "case %d", i)
	}
	_, ok := lzfDecompress([]byte{0xe0, 0x05}, 10)
	require.False(t, ok, "a back reference before the start")
}
