// Package ttl drives activity-based TTL state machines: entities that go
// to STANDBY after 10 idle minutes and are archived 30 minutes later,
// resources destroyed after an hour without requests or 8 hours after
// creation. The smallest complete use, with the entities in the user's own
// table (a [Store]: two methods) and a [Buffer] shared by the Trackers:
//
//	tracker, err := ttl.NewTracker(buffer, ttl.TrackerOptions{})
//	...
//	tracker.Record(id) // per request or message: the hot path
//
//	rules := []ttl.Rule{{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}}
//	runner, err := ttl.NewRunner(store, rules, ttl.RunnerOptions{
//		Buffer: buffer,
//		Wake:   func(ctx context.Context, expired []ttl.Expiry) error { return controller.Act(ctx, expired) },
//	})
//	...
//	defer runner.Close(ctx)
//
// Activity flows through up to three stages, each merging with "greater
// wins" so that late or reordered batches never move time backwards:
//
//	Tracker.Record(id)     in memory, per request or message (hot path)
//	  │ Flush, every TrackerOptions.FlushInterval (30 s)
//	  ▼
//	Buffer                 optional, shared by many trackers (ttl/redisttl)
//	  │ Runner.Tick, every RunnerOptions.Interval (60 s): walk with Peek,
//	  │ Store.Add, Remove, to the end of the buffer
//	  ▼
//	Store                  the source of truth (ttl/pgttl), decides expiry
//
// [Runner.Tick] then applies the Rules in order, each as one conditional
// update in the Store using the Store's own clock, and calls
// [RunnerOptions.Wake] with what they changed ([Expiry]: the decision and
// the last activity it was based on), so that a controller acts on it. The
// Store asks of the user's table only what the Runner needs, [Store.Add]
// and [Store.Apply]; the entities' other writes (creating them, moving their
// phase, claiming one for an operation) are the system's. A controller that
// sees activity after the decision keeps the entity and clears its desired
// state, so that the rule can fire again. Wakes are not retried; the
// controller also reconciles, reading the entities whose desired state is
// set.
//
// Backends implement Buffer and Store and prove it with the conformance
// suites in ttl/ttltest. [MemoryBuffer] is the in-process Buffer.
//
// # Guarantees
//
// The promise is that an entity with activity inside its TTL is never
// expired, and that an idle one is. Below, F is the Trackers' FlushInterval,
// T the Runner's Interval, R the Trackers' Resolution, H the Runner's hold
// (with a Paced Buffer, the longest F the Trackers noted in it plus T, and
// at least RunnerOptions.Hold; otherwise Hold, by default 30 s + T), and After the TTL of a SinceLastActivity rule
// ("idle rule"); "plus the work" means plus the time a flush, a drain and
// the rules take. The bounds
// assume After > F + T plus the work: activity needs that long to reach the
// Store, so a shorter TTL cannot be kept.
//
// With every part up: activity recorded at time a is in the Store by
// a + F + T plus the work: the Tracker hands it to the Buffer within F, and
// the first tick that starts after that drains it before it applies a rule
// (a drain walks to the end of the buffer, past entries refreshed under it;
// a tick whose drain does not get there skips its idle rules). The time
// recorded is never before a, however loaded the machine, and at most R
// after it (Record rounds its coarse clock up) while the Tracker refreshes
// that clock on time; when the refresh runs late, the times recorded
// meanwhile are moved up to the refresh, or to the flush that comes first,
// so they are late by up to as long as it was. So an idle rule fires no
// earlier than After after an entity's last activity, and at most R + T
// later (plus any lateness of the refresh), at the first tick past it. An
// entity active at least every P, with P + F + T plus the work below After,
// is never expired.
//
// When the Buffer loses what it holds (a Redis restarted without
// persistence, a deleted key: a Lossy buffer's generation changes), the
// Runner sees it at the end of its next drain, skips its idle rules on that
// tick and holds them for H; every Tracker sees it at its next successful
// flush and sends again everything it flushed within its Retain. With
// H ≥ F + T plus the work (a Paced Buffer's H, as long as the work fits in
// a tick), and Retain ≥ 2F + T plus the work plus the outage, the lost
// activity is back in the Store before an idle rule runs again: both
// bounds above hold, except that a decision due during the hold comes at
// the first tick after it (at most H + T late). A Runner reading a Paced
// Buffer knows the F of the Trackers that flushed into it before its last
// drain; a Tracker slower than all of those, whose first flush was lost
// before the Runner read its note, may need longer than H. A Runner that
// starts after a loss cannot tell that one happened; until the Trackers have
// sent their retained activity again (within F of the Buffer answering), it
// may decide an entity whose last activity was lost up to F + T plus the
// work early. A loss that keeps the generation (a failover to a replica that
// missed the last writes), or any loss of a Buffer that is not Lossy, goes
// unseen: the activity flushed but not yet drained, at most F + T plus the
// work of it, is gone, and an entity whose last activity was in it may be
// decided that much early.
//
// When the Buffer cannot be read, ticks skip their idle rules, and hold them
// for H after the last failing tick; Trackers keep what they cannot flush
// and send it when the Buffer answers again. The bounds hold; decisions due
// meanwhile come at most the outage + H + T late.
//
// When the Store is down (or refuses a merge), a tick that read activity it
// could not merge skips its idle rules; the activity stays buffered and the
// next tick that reaches the Store merges it first. The bounds hold;
// decisions are late by the outage. Without a Buffer (the Trackers flushing
// into the Store), the
// Trackers keep their failed flushes and the Runner holds its idle rules for
// H after any tick whose rules the Store refused, with the same result when
// H ≥ F + T plus the work.
//
// When a proxy crashes, the activity its Tracker recorded since its last
// successful flush (at most F, unless its flushes were failing) is gone,
// and no other part can know. An entity whose only recent activity went
// through that proxy looks idle since the activity before: it can be
// expired up to F (or the time its flushes were failing) before its TTL has
// passed since its true last activity. An entity that stays active, with
// its next request going to another Tracker, is not expired as long as
// 2(P + F) + T plus the work is below After.
package ttl
