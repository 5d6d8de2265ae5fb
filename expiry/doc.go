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
// A read never returns a key whose deadline has passed: every accessor deletes
// an expired key it finds (passive expiry), and an [Expirer] reclaims the keys
// nobody reads (active expiry) with the algorithm and defaults of Redis's
// expire.c. Each cycle has a time budget, so a mass expiry is spread over
// several cycles and nobody stalls: readers take no lock, and a writer waits
// for at most one sampled key. Sampling costs O(1) per key and covers the whole
// map, so no block of long-lived keys can hide expired ones.
//
// Like Redis, active expiry bounds stale keys statistically: up to about
// [Options.Threshold] of the keys with a deadline may be expired but not yet
// deleted ([Stats].StaleEstimate tracks it), and no read returns one.
//
// [Map] is a sharded map that runs its own Expirer; any other store gets
// active expiry by implementing [Keyspace] and running an Expirer over it.
package expiry
