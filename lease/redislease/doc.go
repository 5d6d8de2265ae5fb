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
// alone lose everything since the last one); on Redis 7.2 or later with
// replicas, also make sure a write is on the failover candidates before
// the grant is trusted (WAITAOF on the replicas, or at least WAIT), and let
// failover (Sentinel, Cluster) promote only replicas that have it. Then
// set Options.TrustRestarts.
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
//   - The state hash holds the run_id of the server that last granted from
//     it (INFO server, read inside the grant script). Another run_id means a
//     restart or a failover, after which the data may be older than what
//     clients were told (appendfsync everysec, RDB, a replica that missed
//     writes). Options.TrustRestarts turns this check off.
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
// for a minute in a receipt key named by a per-call nonce. A later,
// separate Release of a released lease returns lease.ErrNotFound with
// lease.ErrReleased. A Sweep batch is lost (never reported, its expired
// events missing) only when every attempt of the call fails.
//
// Scripts call TIME and INFO before writing, which Redis allows with
// effects replication: the default since Redis 5 and the only mode since
// Redis 7. So the store needs Redis 5 or later.
package redislease
