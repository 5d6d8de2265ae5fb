// Package ttl drives activity-based TTL state machines: workspaces that go to
// STANDBY after 10 idle minutes and are archived 30 minutes later, containers
// destroyed after an hour without requests or 8 hours after creation.
//
// Activity flows through up to three stages, each merging with "greater
// wins" so that late or reordered batches never move time backwards:
//
//	Tracker.Record(id)     in memory, per request or message (hot path)
//	  │ Flush, every Tracker FlushInterval (30 s)
//	  ▼
//	Buffer                 optional, shared by many trackers (ttl/redisttl)
//	  │ Runner.Tick, every Runner Interval (60 s): Peek, MergeActivity, Remove
//	  ▼
//	Store                  the source of truth (ttl/pgttl), decides expiry
//
// Runner.Tick then applies the Rules in order, each as one conditional update
// in the Store using the Store's own clock, and calls Wake with the ids whose
// DesiredState changed, so that a controller acts on them. When activity
// read from the Buffer cannot be written to the Store, the tick skips the
// rules measured from LastActivityAt, which the Store then knows to be
// stale; when the Buffer itself is unreachable or lost, the Store decides
// with what it has.
//
// Backends implement Buffer and Store and prove it with the conformance
// suites in ttl/ttltest. MemoryBuffer and MemoryStore are the in-process
// defaults.
package ttl
