package redislease_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/internal/rediskey"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/redislease"
	"github.com/ttlkit/ttlkit/pool/redispool"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// prefixes returns prefixes worth checking: the usual forms, the odd ones
// around braces, and random strings of braces, colons and letters.
func prefixes() []string {
	ps := []string{
		"cams", "app:{cams}:", "{x}", "ttl{kit}cams", "x{", "{", "}", "{}", "{}x", "x{}", "}x", "a}b",
		"a}{", "{{a}}", "{a}{b}", "a{b}c}", "codehub:", "é{ü}", "{ }", "a b",
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}:-é"
	for range 300 {
		var b strings.Builder
		for range 1 + r.IntN(8) {
			b.WriteString(string([]rune(alphabet)[r.IntN(len([]rune(alphabet)))]))
		}
		ps = append(ps, b.String())
	}
	return ps
}

// TestStoresShareOneSlot asks a Redis Cluster (CLUSTER KEYSLOT) for the
// slot of every key of a lease store, a pool inventory and an activity
// buffer, and of the guard key their scripts declare, for many prefixes:
// each accepted prefix puts all of them in one slot, and all three
// packages accept the same prefixes, the ones rediskey.Base accepts.
func TestStoresShareOneSlot(t *testing.T) {
	ctx := context.Background()
	r := redistest.OpenRedisCluster(t)
	accepted := 0
	for _, p := range prefixes() {
		base, err := rediskey.Base("x", p)
		s, lerr := redislease.New(r.Client, redislease.Options{Prefix: p})
		inv, perr := redispool.New(r.Client, redispool.Options{Prefix: p})
		b, terr := redisttl.New(r.Client, redisttl.Options{Prefix: p})
		if err != nil {
			if !errors.Is(lerr, lease.ErrInvalid) || !errors.Is(perr, redispool.ErrInvalid) || !errors.Is(terr, ttl.ErrInvalid) {
				t.Errorf("prefix %q: Base refuses it (%v), but the stores say %v, %v, %v", p, err, lerr, perr, terr)
			}
			continue
		}
		if lerr != nil || perr != nil || terr != nil {
			t.Errorf("prefix %q: Base accepts it, but the stores say %v, %v, %v", p, lerr, perr, terr)
			continue
		}
		accepted++
		// The buffer's one key, as its Options document it, holds what it
		// is given.
		if err := b.Add(ctx, []ttl.Activity{{ID: "x", At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Client.Exists(ctx, base+"activity").Result(); err != nil || n != 1 {
			t.Fatalf("prefix %q: the buffer's key %q: exists %d, %v", p, base+"activity", n, err)
		}
		keys := slices.Concat(s.Keys(), inv.Keys(), []string{base + "activity", base + "guard"})
		var want int64 = -1
		for _, k := range keys {
			if !strings.HasPrefix(k, base) {
				t.Errorf("prefix %q: key %q is not under the base %q", p, k, base)
			}
			slot, err := r.Client.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if want == -1 {
				want = slot
			} else if slot != want {
				t.Errorf("prefix %q: key %q is in slot %d, key %q in slot %d", p, keys[0], want, k, slot)
			}
		}
	}
	t.Logf("%d of %d prefixes accepted", accepted, len(prefixes()))
	if accepted < 100 {
		t.Errorf("only %d prefixes accepted: the check proves little", accepted)
	}
}

// TestTagMatchesServer: for random keys, the slot that Tag implies (the
// CRC16 of the tag, or of the whole key without one) is the slot the
// server computes.
func TestTagMatchesServer(t *testing.T) {
	ctx := context.Background()
	r := redistest.OpenRedisCluster(t)
	for _, k := range append(prefixes(), "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}") {
		k += "leases"
		h := k
		if tag, ok := rediskey.Tag(k); ok {
			h = tag
		}
		want := int64(crc16(h) % 16384)
		got, err := r.Client.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("key %q: server slot %d, Tag gives %q, slot %d", k, got, h, want)
		}
	}
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis Cluster's
// key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
