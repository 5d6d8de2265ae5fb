// Package redislease is a lease.Store on Redis, shared by any number of
// lease.Managers in any number of processes.
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
//	state      HASH    units in use, last token, generation, server run, hold
//	released   ZSET    ids released in the last lease.ReleasedRetention
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
// alone lose everything since the last one); with replicas, also make sure
// a write is on the failover candidates before it is trusted
// (Options.WaitReplicas; on Redis 7.2 or later WAITAOF on the replicas),
// and let failover (Sentinel, Cluster) promote only replicas that have it.
// Then set Options.TrustRestarts. Without these, the store notices what it
// lost and holds grants back, as "State loss" says; a Redis Cluster is
// covered in "Redis Cluster".
//
// # State loss
//
// When Redis loses data anyway, the store notices it on the next grant and
// stops granting until every lease it granted before must have lapsed:
//
//   - The state hash holds a generation, a random id set when the state is
//     created. A Store remembers the generation it last saw; a state that is
//     missing, or of another generation, although the Store saw one means
//     the state was lost (a restart with no persistence, keys deleted).
//   - The state hash holds the run_id and the replication id
//     (master_replid) of the server that last granted from it (INFO server
//     and INFO replication, read inside the grant script). Another run_id
//     means a restart or a failover, another replication id on the same run
//     a failover and back, after which the data may be older than what
//     clients were told (appendfsync everysec, RDB, a replica that missed
//     writes). Options.TrustRestarts turns this check off;
//     Options.WaitReplicas makes a replica promoted on a Redis Cluster no
//     loss (see "Redis Cluster").
//
// After a loss the store refuses every grant with lease.ReasonRecovering,
// RejectedError.RetryAfter saying for how long, for Options.MaxGrace from
// the moment it noticed: no lease may stay live longer than MaxGrace
// without a heartbeat (a grant whose Grace and TTL both exceed it is
// invalid), and a holder counts its deadline from when it sent its last
// acknowledged call, which was before the loss. Fencing tokens never go
// below the server clock in microseconds, so those issued after a loss are
// above those issued before (clocks of a failover pair must agree within
// MaxGrace). Leases lost with the state are gone: a heartbeat returns
// lease.ErrNotFound, and lease.KeepAlive reports the loss.
//
// What it cannot notice: a loss that happens while no running Store has
// seen the state and with no restart in between (say, every process and a
// Redis without persistence restart together), and a failover to a replica
// that has none of the store's keys while no running Store has seen them.
// Those look like a new store. Wait MaxGrace before starting the Managers
// in such a case, or give Redis persistence.
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
//     no call fails; calls wait a moment. Without WaitReplicas the store
//     cannot tell this from a failover that lost writes (it sees another
//     server run) and refuses grants for MaxGrace with
//     lease.ReasonRecovering; with WaitReplicas it grants on at once.
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
//   - Without WaitReplicas, replication is asynchronous: what a master
//     acknowledged in its last moments (its replica's lag) may never reach
//     the replica that takes over. Acknowledged grants vanish, released
//     leases come back, heartbeats are undone (in the test, 50-odd
//     acknowledged grants of a replica cut off for 300 ms). The store
//     notices the new server on the next grant and refuses grants for
//     MaxGrace, until every lease granted before has lapsed for its holder
//     (see "State loss"); tokens never go below the server clock in µs, so
//     they keep growing (the clocks of the master and its replicas must
//     agree within MaxGrace). So across the failover clients never trust
//     more than the budget or two leases of one holder, and no token is
//     issued twice; a lease that was lost is reported by its next heartbeat
//     (lease.ErrNotFound) and by its KeepAlive.
//   - With WaitReplicas set to the number of replicas of each master,
//     every write waits until the replicas have it, so a replica that takes
//     over has every write a client was told of; a grant that finds another
//     cluster node continuing the replication history of the master that
//     last granted (its master_replid2 is that master's master_replid) is
//     no loss, and grants go on without the hold. Proven: no acknowledged
//     grant lost, no token issued twice, no grant refused. The price is
//     a round trip to the replicas on every write (see bench/README.md) and
//     availability: while a master has no replica in sync (after a
//     failover, until the dead node is back as a replica) every write fails
//     after WaitTimeout with ErrNotReplicated. A smaller WaitReplicas keeps
//     writing with a replica down, but the replica promoted may not be one
//     that acknowledged; the store then trusts a promotion it should not.
//     Every Store on one Prefix must use the same WaitReplicas.
//   - A master that restarts before its replica takes over keeps its
//     slots with what its persistence kept (nothing without it). That is a
//     loss even with WaitReplicas, and the store holds grants back for
//     MaxGrace, unless Options.TrustRestarts says the server keeps every
//     acknowledged write (appendfsync always).
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
// Scripts call TIME and INFO before writing, which Redis allows with
// effects replication: the default since Redis 5 and the only mode since
// Redis 7. So the store needs Redis 5 or later.
package redislease
