// Package redisttl keeps a ttl.Buffer in a Redis sorted set, so that the
// Trackers of many instances (the proxies in front of the entities) share
// one activity buffer that a ttl.Runner drains into the Store:
//
//	buf, err := redisttl.New(client, redisttl.Options{Prefix: "app"}) // the key {app}:activity
//	if err != nil { ... }
//	tracker, err := ttl.NewTracker(buf, ttl.TrackerOptions{})         // in every proxy
//	runner, err := ttl.NewRunner(store, rules, ttl.RunnerOptions{Buffer: buf})
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
// a member at score -inf that Peek never shows): whatever loses the
// set loses it too. A ttl.Runner that sees a new generation holds its idle
// rules, and every ttl.Tracker that sees it sends again the activity it
// flushed within TrackerOptions.Retain, so the lost activity reaches the
// Store before an idle rule runs again. The Buffer is ttl.Paced: every
// Tracker notes its FlushInterval in a set beside the sorted set
// (Buffer.NoteFlushInterval), and the Runner holds for the longest it has
// read there plus its own Interval (see RunnerOptions.Hold).
//
// A call the server refuses without running it because of a Redis Cluster
// (TRYAGAIN, CLUSTERDOWN, a MOVED or ASK past go-redis's redirections) or a
// restart (LOADING, READONLY) is sent again, 2 ms apart doubling to 100 ms,
// for up to 5 s or until its context ends.
//
// # Redis Cluster
//
// The buffer is one key (see Options.Prefix), so it works through a
// go-redis *redis.ClusterClient as through a client of one server. This is
// what holds there:
//
//   - Resharding. Add and Peek are commands on the one key, which the
//     client follows to wherever the key is while the slot moves. Remove
//     runs its compare-and-remove script (never the WATCH transaction,
//     which a migration aborts) and Generation its script; both also
//     declare a key named "guard" under the prefix that is never written,
//     so the cluster refuses them whole while the slot moves and they are
//     sent again until the migration is over. Proven: with the slot moving
//     again and again under writers and a drainer, no call fails and the
//     drained times are exactly the latest written for each id.
//   - Graceful failover (CLUSTER FAILOVER on a replica): the master pauses
//     its clients until the replica has every write, so nothing is lost.
//     Proven under the same load: no call fails, the drained times are
//     exact.
//   - Hard failover: calls fail until the replica is promoted,
//     cluster-node-timeout plus one to three seconds, and a few hundred
//     milliseconds more (see lease/redislease's "Redis Cluster" for the
//     window and the client settings); the buffer has the client reload
//     the cluster's layout after every failed call. Replication is
//     asynchronous, so the activity the dead master acknowledged in its
//     last moments (its replica's lag) can be lost, and unlike a restart
//     without persistence this keeps the generation: nobody notices. The
//     Store then has an older last activity for an id only if no later
//     activity of that id arrives, so an idle rule can fire at most that
//     lag early; with idle rules of minutes and a lag of milliseconds this
//     rarely matters. The package has no option to wait for replicas.
package redisttl
