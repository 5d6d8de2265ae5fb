// Package ttl applies activity-based TTLs to entities kept in the user's
// own table: an entity goes to STANDBY after 10 idle minutes and is
// archived 30 minutes later; a resource is destroyed after an hour without
// requests or 8 hours after creation. The smallest complete use, with the
// entities in a [Store] (two methods) and a [Buffer] shared by the
// Trackers:
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
// A [Tracker] records activity in memory and flushes it every
// [TrackerOptions.FlushInterval] to a Buffer ([MemoryBuffer] in one
// process, ttl/redisttl shared by many) or straight to the Store. A
// [Runner] ticks every [RunnerOptions.Interval]: it drains the Buffer into
// the Store (ttl/pgttl on PostgreSQL), applies the [Rule] values in order,
// each as one conditional update on the Store's clock, and passes the
// resulting [Expiry] values to [RunnerOptions.Wake]. Every stage merges
// activity with "greater wins", so late or reordered batches never move
// time backwards. Backends prove their Buffer and Store with the suites in
// ttl/ttltest.
//
// # Guarantees
//
// An entity with activity inside its TTL is never expired, and an idle one
// is. Below, F is the Trackers' FlushInterval, T the Runner's Interval, R
// the Trackers' Resolution, H the Runner's hold ([RunnerOptions.Hold]), W
// the time a flush, a drain and the rules take, and After the TTL of a
// SinceLastActivity ("idle") rule, which must exceed F + T + W: activity
// needs that long to reach the Store.
//
// With every part up, activity recorded at time a is in the Store by
// a + F + T + W, with a time no earlier than a and at most R later (more
// if the Tracker's clock refresh runs late; see [TrackerOptions.Resolution]).
// An idle rule fires no earlier than After
// after an entity's last activity, and at most R + T later. An entity active
// at least every P, with P + F + T + W < After, is never expired. When a
// part fails:
//
//   - Buffer unreadable: ticks skip their idle rules, and hold them for H
//     after the last failing tick; Trackers keep what they cannot flush.
//     The bounds hold; decisions come up to the outage + H + T late.
//   - Store down or refusing a merge: a tick that could not merge skips its
//     idle rules and the activity stays buffered. The bounds hold;
//     decisions come late by the outage. Without a Buffer, Trackers keep
//     their failed flushes and the Runner holds its idle rules for H after
//     any tick whose rules the Store refused: the same, when H ≥ F + T + W.
//   - [Lossy] Buffer lost (its generation changes, as when Redis restarts
//     without persistence): the Runner sees it at the end of its next drain
//     and holds its idle rules for H; each Tracker sees it at its next
//     successful flush and resends what it flushed within Retain. With
//     H ≥ F + T + W and Retain ≥ 2F + T + W + the outage, the bounds hold,
//     except that a decision due during the hold comes at the first tick
//     after it (up to H + T late). A Tracker slower than every one the
//     Runner has seen, whose notes in a [Paced] Buffer were all lost before
//     the Runner read one, may need longer than H. A Runner that starts
//     after a loss cannot see it: until the Trackers resend (within F), it
//     may decide an entity up to F + T + W early.
//   - A loss the generation does not show (a failover to a replica that
//     missed writes, or any Buffer that is not Lossy): the activity flushed
//     but not yet drained, up to F + T + W of it, is gone, and an entity
//     whose last activity was in it may be decided that much early.
//   - A process crash: its Tracker's activity since its last successful
//     flush (at most F, unless flushes were failing) is gone, and an entity
//     whose only recent activity went through it may be expired that much
//     early. An entity that stays active through another Tracker is kept as
//     long as 2(P + F) + T + W < After.
package ttl
