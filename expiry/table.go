package expiry

import (
	"math/bits"
	"sync/atomic"
)

// The hash table of one shard. Readers take no lock and write nothing: they
// load the table, the bucket's metadata word and a node pointer, all with
// atomic loads, and the node they find is immutable. Writers hold the
// shard's mutex; they publish a new node with one atomic store of its
// pointer, and a resize builds a new table and publishes it with one atomic
// store, so a reader sees either the table before a write or after it.
//
// A bucket is one cache line: a metadata word holding one tag byte per
// slot (0 for an empty slot; else 0x80 and 7 bits of the key's hash), six
// node pointers and a pointer to an overflow bucket. A lookup compares the
// tag with all six bytes at once and dereferences only the nodes whose tag
// matches, so a Get touches the bucket's line, its node and the key's bytes.
// This is the layout of xsync's MapOf and otter's hash map, without their
// per-bucket locks: writers serialise on the shard instead.

const (
	slotsPerBucket = 6
	// maxLoad is the average number of keys per bucket above which a
	// table doubles (two thirds of its slots).
	maxLoad = 4

	lsbs = 0x0000_0101_0101_0101 // the low bit of each slot's byte
	msbs = 0x0000_8080_8080_8080 // the high bit of each slot's byte
)

type bucket[K comparable, V any] struct {
	meta  atomic.Uint64
	slots [slotsPerBucket]atomic.Pointer[node[K, V]]
	next  atomic.Pointer[bucket[K, V]]
}

type table[K comparable, V any] struct {
	buckets []bucket[K, V]
	mask    uint64
}

func newTable[K comparable, V any](n int) *table[K, V] {
	n = 1 << bits.Len(uint(max(n, 1)-1))
	return &table[K, V]{buckets: make([]bucket[K, V], n), mask: uint64(n - 1)}
}

// tagOf returns the byte that marks a key with hash h in a bucket's
// metadata: 7 bits of the hash that neither the shard nor the bucket index
// uses, with the high bit set so that it is never 0 (empty).
func tagOf(h uint64) uint64 { return (h>>40)&0x7f | 0x80 }

// matches returns the high bit of each byte of meta equal to tag. It may
// report a byte above a true match falsely (a borrow); callers compare the
// key anyway.
func matches(meta, tag uint64) uint64 {
	x := meta ^ (lsbs * tag)
	return (x - lsbs) &^ x & msbs
}

// slotOf turns the lowest bit of a matches or empty mask into a slot index.
func slotOf(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// lookup returns k's node, or nil. It takes no lock.
func (t *table[K, V]) lookup(h uint64, k K) *node[K, V] {
	tag := tagOf(h)
	for b := &t.buckets[h&t.mask]; b != nil; b = b.next.Load() {
		for m := matches(b.meta.Load(), tag); m != 0; m &= m - 1 {
			if n := b.slots[slotOf(m)].Load(); n != nil && n.key == k {
				return n
			}
		}
	}
	return nil
}

// find returns the bucket and slot of k, or a nil bucket. Caller holds the
// shard's mutex.
func (t *table[K, V]) find(h uint64, k K) (*bucket[K, V], int) {
	tag := tagOf(h)
	for b := &t.buckets[h&t.mask]; b != nil; b = b.next.Load() {
		for m := matches(b.meta.Load(), tag); m != 0; m &= m - 1 {
			i := slotOf(m)
			if n := b.slots[i].Load(); n != nil && n.key == k {
				return b, i
			}
		}
	}
	return nil, 0
}

// insert adds n, whose key is not in t, under hash h. Caller holds the
// shard's mutex. The node is stored before its tag, so a reader that sees
// the tag finds the node.
func (t *table[K, V]) insert(h uint64, n *node[K, V]) {
	tag := tagOf(h)
	b := &t.buckets[h&t.mask]
	for {
		meta := b.meta.Load()
		if free := ^meta & msbs; free != 0 {
			i := slotOf(free)
			b.slots[i].Store(n)
			b.meta.Store(meta | tag<<(8*i))
			return
		}
		next := b.next.Load()
		if next == nil {
			nb := &bucket[K, V]{}
			nb.slots[0].Store(n)
			nb.meta.Store(tag)
			b.next.Store(nb)
			return
		}
		b = next
	}
}

// clear empties slot i of b. Caller holds the shard's mutex. The tag goes
// first: a reader that still sees it loads nil or the old node, both of
// which read as before the delete.
func (b *bucket[K, V]) clear(i int) {
	b.meta.Store(b.meta.Load() &^ (0xff << (8 * i)))
	b.slots[i].Store(nil)
}

// each calls f for every node in t. Without the shard's mutex it sees a
// snapshot that may or may not include concurrent writes.
func (t *table[K, V]) each(f func(*node[K, V])) {
	for i := range t.buckets {
		for b := &t.buckets[i]; b != nil; b = b.next.Load() {
			for s := range b.slots {
				if n := b.slots[s].Load(); n != nil {
					f(n)
				}
			}
		}
	}
}

// eachIn calls f for every node of bucket chain i.
func (t *table[K, V]) eachIn(i uint64, f func(*node[K, V])) {
	for b := &t.buckets[i&t.mask]; b != nil; b = b.next.Load() {
		for s := range b.slots {
			if n := b.slots[s].Load(); n != nil {
				f(n)
			}
		}
	}
}
