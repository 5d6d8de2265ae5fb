// Package redisttl keeps ttl's shared state in Redis: a ttl.Buffer in a
// sorted set, so that the Trackers of many proxy instances share one
// activity buffer that a ttl.Runner drains into the Store (the
// "codehub:activity" ZSET of a cloud-IDE workspace system, Options.Key), and a ttl.Store
// for systems whose only shared database is Redis (see Store).
//
// # Buffer
//
// Every member is an entity id; its score is the entity's latest activity
// time in Unix milliseconds, which a float64 score holds exactly. Add is
// ZADD GT, so a late or out-of-order batch never moves a time back. Peek walks
// the set in (score, member) order: ZRANGE WITHSCORES for the first page, and
// for the next ones a script that finds the place after the previous page's
// last entry, so a drain continues past entries refreshed under it. Remove deletes a member only if its
// score is still the one Peek returned: an activity that lands between Peek
// and Remove survives to the next tick, where a hand-written ZRANGE,
// UPDATE, ZREM would lose it. Remove reads the scores with ZMSCORE under WATCH and
// deletes the unchanged members with ZREM in MULTI/EXEC; when an Add writes
// the key in between, the EXEC is refused and one Lua script does the same
// compare-and-remove instead. Several Runners may drain the same key: a
// Remove that comes late, after another Runner drained the batch and newer
// activity arrived, compares with the newer scores and leaves them.
//
// Redis is only a write buffer, and may lose it: a server restarted without
// persistence comes back empty and accepts the next flushes as if nothing
// happened. So the set also holds the buffer's generation (Buffer.Generation,
// a member at score -inf that Peek and Len never show): whatever loses the
// set loses it too. A ttl.Runner that sees a new generation holds its idle
// rules for RunnerOptions.Hold, and every ttl.Tracker that sees it sends
// again the activity it flushed within TrackerOptions.Retain, so the lost
// activity reaches the Store before an idle rule runs again.
package redisttl
