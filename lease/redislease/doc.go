// Package redislease is a lease.Store on Redis, shared by any number of
// lease.Managers in any number of processes.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // or a ClusterClient
//	store, err := redislease.New(client, redislease.Options{Prefix: "cams"})
//	if err != nil { ... }
//	m, err := lease.New(35, lease.Options{Store: store}) // the same budget and prefix on every instance
//
// Every operation is one round trip: a Lua script run with EVALSHA (EVAL
// when the server has not cached it yet) that takes the time from the
// server's TIME, so clients' clocks never matter, and decides atomically.
// A grant checks the gate verdict, the holder rule and the budget in one
// script and takes its fencing token in the same script, so Managers
// sharing a store can never oversubscribe the budget, give a holder two
// live leases, or issue one token twice. Heartbeat and Release with a
// holder check it in the same script.
//
// # Data
//
// All keys share one Redis Cluster hash slot (see Options.Prefix):
//
//	leases     HASH    id → record (holder, resource, cost, token, times)
//	deadlines  ZSET    live lease ids by deadline
//	expired    ZSET    expired, not yet swept lease ids
//	holders    ZSET    live leases by holder (lexicographic index)
//	state      HASH    units in use, last token, generation, version, window, hold
//	released   ZSET    ids released in the last minute
//	receipts   HASH    the replies of Release and Sweep calls in flight
//	receipted  ZSET    when each receipt may go
//
// Times are microseconds since the epoch on the server's clock, exactly as
// TIME returns them: a lease's HeartbeatAt is never earlier than the moment
// its heartbeat was sent, so the local deadline of lease.KeepAlive and
// lease.HeartbeatResult is never after the store's.
//
// Each script first moves the leases whose deadline has passed from
// deadlines to expired and takes their units out of the state, so an
// expired lease is absent for reads and the budget at once; Sweep then
// removes expired records, each exactly once however many sweepers run.
//
// Holder and Resource may be any bytes of any length.
//
// The layout changed with the microsecond times and the state hash: data
// written by an earlier version under a Prefix (millisecond times, used
// and token keys) cannot be read by this one. Move to a new Prefix, or
// delete the old keys once no lease under them is live.
//
// # What the server must provide
//
// The promises of lease.Store hold as long as Redis keeps every write it
// acknowledged. For that, run it with appendonly yes and appendfsync always
// (everysec can lose the last second of writes in a crash; RDB snapshots
// alone lose everything since the last one). With replicas, a write must
// be on the replica that takes over before it is trusted: by default every
// write waits for one replica while the master has one (see
// Options.WaitReplicas; set it to the number of replicas when there are
// several), and failover (Sentinel, Cluster) must promote only replicas
// that have it. Without these, the store notices what it lost, as far as
// "State loss" says, and holds grants back; a Redis Cluster is covered in
// "Redis Cluster".
//
// # State loss
//
// When Redis loses data anyway, the store notices it on the next grant and
// stops granting until every lease granted before must have lapsed. It
// tells a loss from the data, never from which server answers, so a slot
// that moved to another master, a replica in sync that took over and a
// restart that kept every write are no loss:
//
//   - The state hash holds a generation, a random id set when the state is
//     created, and a version, counted up by every grant, heartbeat and
//     release. A Store remembers the generation and the highest version
//     in the replies to its acknowledged writes (those the replicas it
//     waits for acknowledged) and sends them with every grant.
//   - A state that is missing (a restart with no persistence, keys
//     deleted) or of another generation although the Store saw one, or of
//     a lower version than the Store saw (the data went back in time: a
//     replica that missed writes took over, a restart lost the last
//     writes), is a loss. A state that went back gets a new generation, so
//     that every Store that saw the old one holds grants back too.
//
// After a loss the store refuses every grant with lease.ErrRecovering,
// RejectedError.RetryAfter saying for how long, for the store's window from
// the moment it noticed: the largest, over the leases granted, of the
// smaller of TTL and Grace. A holder trusts its lease at most that long
// after its last acknowledged call, which it sent before the loss. The
// state keeps the window (it only grows) and each Store the largest it saw
// or sent; the longer of the two counts. MaxGrace bounds it, as no lease
// may have both TTL and Grace above MaxGrace. Fencing tokens never go
// below the server clock in microseconds, so those issued after a loss
// are above those issued before (clocks of a failover pair must agree
// within the window). Leases lost with the state are gone: a heartbeat
// returns lease.ErrNotFound, and lease.KeepAlive reports the loss.
//
// What it cannot notice: a loss that no running Store saw. A state that
// went back to a version at or above what a Store saw is no loss for that
// Store, though it may be for another: a Store learns of the writes of
// others only as far as its own replies carry them, so a Store that grants
// before the Store that saw the lost writes grants again may grant over
// them. Nor a loss while no running Store has seen the state (say, every
// process and a Redis without persistence restart together), and a Store
// that never granted a lease of a longer window holds back only for the
// windows it and the state know. Those look like a new store. Waiting for
// the replicas (the default) closes the first case for failovers; wait the
// longest Grace before starting the Managers in the second, or give Redis
// persistence.
//
// # Failures
//
// Errors from Redis are wrapped and match either lease.ErrNotApplied (the
// call certainly changed nothing) or lease.ErrUnknownOutcome (it may have
// taken effect). With go-redis's retries (the default), a failure is known
// not applied only when the context had ended before the call: an attempt
// whose reply was lost may have taken effect before the attempt whose error
// is returned. With MaxRetries -1 a failed dial, a full pool and a refusal
// by the server (LOADING, READONLY, BUSY, NOSCRIPT, OOM, ...) are also known
// not applied.
//
// go-redis resends a command when the connection breaks; every script is
// safe to repeat. A repeated Grant returns the lease the first attempt
// granted (ids are unique per grant), so a retry never grants twice nor
// reports a rejection for a grant that took effect. A repeated Release or
// Sweep returns the reply of the attempt that took effect, which it kept
// as a receipt under a per-call nonce, a field of the receipts hash. The
// Store deletes a receipt with one of its next Release or Sweep calls once
// the call has returned (no resend of it can come any more); one that no
// call deletes goes after a minute. A later, separate Release of a
// released lease returns lease.ErrNotFound with lease.ErrReleased. A Sweep
// batch is lost (never reported, its expired events missing) only when
// every attempt of the call fails.
//
// A call the server refuses without running it because of a Redis Cluster
// (TRYAGAIN, CLUSTERDOWN, a MOVED or ASK past go-redis's redirections) or a
// restart (LOADING, READONLY) is sent again, 2 ms apart doubling to 100 ms,
// for up to 5 s or until its context ends.
//
// # Redis Cluster
//
// Every key of a store is in one hash slot (see Options.Prefix), so a
// store works through a go-redis *redis.ClusterClient as through a client
// of one server, and stores with different prefixes spread over the
// masters. This is what holds there, as the tests prove on a cluster of
// three masters with a replica each (cluster-node-timeout 1 s) under
// several Managers:
//
//   - Resharding. While the store's slot moves to another master, the
//     cluster refuses its scripts whole: every script also declares a key
//     named "guard" under the prefix that is never written, so that no
//     script runs while some of the store's keys have moved and some not.
//     The store sends them again (see "Failures") until the migration is
//     over, so calls wait for it instead of failing (a migration that
//     takes longer than 5 s makes them fail).
//     Whatever the load, the slot holds the store's eight keys and no
//     others, so a migration moves the same few keys. Proven: no call
//     fails and the history stays linearizable while the slot moves again
//     and again, one key per MIGRATE.
//   - Graceful failover (CLUSTER FAILOVER on a replica). The master pauses
//     its clients until the replica has every write, so nothing is lost and
//     no call fails; calls wait a moment, and grants go on, whether the
//     Stores wait for replicas or not: the state is as they left it.
//   - Hard failover (a master dies, and its replica is promoted after
//     cluster-node-timeout and an election). Calls on the store fail from
//     the master's death until the replica is promoted, which takes Redis
//     cluster-node-timeout plus one to three seconds (1.9–2.9 s in the
//     tests with a timeout of 1 s), and then until the client knows it. The
//     store has the ClusterClient reload the cluster's layout after every
//     failed call (go-redis itself does so only after a redirection, else
//     once a minute), so with the client settings below the last call
//     failed 0.1–0.3 s after the promotion in the tests, which accept up
//     to 1 s. A lease.KeepAlive carries its lease across a hard failover
//     only if the lease's Grace exceeds this window plus the heartbeat
//     interval: cluster-node-timeout + 4 s + interval leaves room (the
//     tests keep a lease with 6 s alive; one with 1 s is lost).
//   - With the default WaitReplicas every write waits until the master's
//     replica has it, so the replica that takes over has every write a
//     client was told of: no acknowledged grant lost, no grant refused, as
//     the tests prove with the replica cut off from its master before it
//     died (a write it did not acknowledge fails with ErrNotReplicated).
//     The new master has no replica until the dead one is back, and the
//     Stores see that it never had one, so they write on without waiting.
//     The price is a round trip to the replica on every write (see
//     bench/README.md). With more replicas per master, set WaitReplicas to
//     their number, or the replica promoted may not be one that
//     acknowledged; then, as with WaitReplicas 1 on such a master, every
//     write fails after WaitTimeout with ErrNotReplicated while the new
//     master has fewer replicas in sync.
//   - Never waiting (WaitReplicas -1), replication is asynchronous: what a
//     master acknowledged in its last moments (its replica's lag) may
//     never reach the replica that takes over. Acknowledged grants vanish,
//     released leases come back, heartbeats are undone (in the test, 50-odd
//     acknowledged grants of a replica cut off for 300 ms). Each Store that
//     saw the lost writes notices that the state went back on its next
//     grant and refuses grants for the window (see "State loss"); tokens
//     never go below the server clock in µs, so they keep growing.
//   - A master that restarts before its replica takes over keeps its
//     slots with what its persistence kept: with appendfsync always
//     everything, and grants go on; without persistence nothing (its
//     replica, syncing from it, loses the keys too), which the store
//     notices as a loss.
//
// Client settings, in go-redis's ClusterOptions: DialerRetries 1 (by
// default go-redis dials a dead master five times, 100 ms apart, on every
// call and every reload of the layout), DialTimeout about 1 s (a master
// whose host drops packets instead of refusing costs each call that
// long), ReadTimeout above WaitTimeout, and an Addrs slice of its own for
// each client (go-redis appends the nodes it finds to it). The other
// defaults fit: MaxRedirects 3 and the store's own resends cover
// migrations, and ClusterStateReloadInterval matters only without traffic.
//
// Scripts call TIME before writing, which Redis allows with effects
// replication: the default since Redis 5 and the only mode since Redis 7.
// So the store needs Redis 5 or later.
package redislease
