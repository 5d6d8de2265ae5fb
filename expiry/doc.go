// Package expiry gives keys a deadline the way Redis does: passive expiry on
// access plus active expiry by random sampling, with a bounded cost per cycle.
//
//	m, err := expiry.NewMap(expiry.MapOptions[string, string]{})
//	if err != nil {
//		return err
//	}
//	defer m.Close(ctx)
//	err = m.SetWithTTL("session:42", "alice", 30*time.Minute)
//	v, ok := m.Get("session:42") // "alice", true; false once expired
//
// A read never returns a key whose deadline has passed: [Map.Get] and every
// other accessor check the deadline and delete an expired key on the spot
// (passive expiry). Keys nobody reads are reclaimed by an [Expirer] (active
// expiry). Every [Options.Interval] it samples [Options.SampleSize] random
// keys that carry a deadline, deletes the expired ones, and repeats at once
// while more than [Options.Threshold] of the recent samples was expired,
// which is the algorithm of Redis's expire.c, with Redis's parameters as the
// defaults (100 ms, 20 keys, 10 %, 25 % of the interval). A cycle stops when
// it has spent its time budget ([Options.Budget]); while cycles end on their
// budget the next one follows after a pause as long as the cycle (Redis's
// fast cycles play that part), so a mass expiry is spread over several
// cycles and nobody stalls: readers take no lock, and a writer waits for at
// most one sampled key.
//
// Sampling costs O(1) per sampled key. [Map] keeps the keys that carry a
// deadline in a dense slice per shard (each key knows its position, so it
// leaves in O(1)) and takes each sampled key from the next shard of a random
// permutation, at a random position: no full scan, no heap, and a round
// samples the whole map, so no block of long-lived keys (nor a shard already
// cleaned) can hide expired ones.
//
// Reads never lock: each shard is a hash table of cache-line buckets (a
// metadata word of hash tags and six pointers to immutable records holding
// key, value and deadline) that writers change with atomic stores under the
// shard's mutex. A read checks the deadline in the record it loaded, so it
// can never return an expired key, and writes nothing.
//
// Like Redis, active expiry bounds stale keys statistically: a cycle stops
// once its last rounds find at most Threshold expired, so up to about that
// share of the keys with a deadline may be expired but not yet deleted, and
// no read ever returns one. [Stats].StaleEstimate tracks it.
//
// [Map] is a sharded map that runs its own Expirer. It reports every key it
// finds expired to [MapOptions.OnEvent], on a goroutine of its own through a
// bounded queue, so neither readers nor active expiry ever wait for the
// callback; [Map.Close] stops both goroutines. Any other store can get
// active expiry by implementing [Keyspace] and running an Expirer over it.
package expiry
