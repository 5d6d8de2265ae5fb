// Package ttl expires entities kept in the user's own table by activity and
// age: STANDBY after 10 idle minutes, ARCHIVED 30 minutes later, DESTROYED
// 8 hours after creation. The smallest complete use, with the table as a
// [Store] (two methods) and a [Buffer] shared by the Trackers:
//
//	tracker, err := ttl.NewTracker(buffer, ttl.TrackerOptions{})
//	...
//	tracker.Record(id) // per request or message: the hot path
//
//	rules := []ttl.Rule{{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}}
//	runner, err := ttl.NewRunner(store, rules, ttl.RunnerOptions{Buffer: buffer, Wake: controller.Act})
//	...
//	defer runner.Close(ctx)
//
// A [Tracker] flushes what it records every 30 s to a Buffer ([MemoryBuffer],
// or ttl/redisttl shared by processes) or straight to the Store. Every 60 s
// a [Runner] drains the Buffer into the Store (ttl/pgttl on PostgreSQL),
// applies the rules on the Store's clock and passes each [Expiry] to
// [RunnerOptions.Wake]. Every stage merges with "greater wins", so late
// batches never move time backwards. ttl/ttltest tests backends.
//
// # Guarantees
//
// Let F be the Trackers' FlushInterval, T the Runner's Interval, R the
// Trackers' Resolution, H the Runner's hold ([RunnerOptions.Hold]) and W
// the time a flush, a drain and the rules take. Activity recorded at a
// reaches the Store by a + F + T + W, stamped no earlier than a and at most
// R later ([TrackerOptions.Resolution]). A SinceLastActivity rule, whose
// After must exceed F + T + W, fires no earlier than After past the last
// activity and at most R + T later: an entity active at least every P, with
// P + F + T + W < After, is never expired. On failures:
//
//   - Buffer unreadable, or Store down: nothing is decided early; decisions
//     come up to the outage + H + T late (the outage alone when only the
//     Store behind a Buffer is down). Without a Buffer this takes
//     H ≥ F + T + W.
//   - [Lossy] Buffer lost: with H ≥ F + T + W and Retain ≥ 2F + T + W +
//     the outage, nothing is decided early, and decisions due during the
//     hold come up to H + T late. But a Tracker slower than every one the
//     Runner has seen, whose notes in a [Paced] Buffer were all lost, may
//     need longer than H; and a Runner started after the loss cannot see
//     it, and may decide up to F + T + W early until the Trackers resend
//     (within F).
//   - A loss the generation does not show (failover to a lagging replica,
//     or a Buffer that is not Lossy): the undrained activity, up to
//     F + T + W of it, is gone, so an entity may be decided that much early.
//   - A process crash: its Tracker's unflushed activity (at most F, unless
//     flushes were failing) is gone, so an entity whose only recent
//     activity went through it may be expired that much early; one that
//     stays active through another Tracker is kept while
//     2(P + F) + T + W < After.
package ttl
