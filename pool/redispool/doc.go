// Package redispool is a shared.Inventory on Redis: one warm pool shared by
// several pool.Pool instances in several processes (the replicas of a
// service sharing their pre-started containers).
//
// Give every instance its own pool.Pool with the same Provisioner type, an
// Inventory with the same Options.Prefix, and its own pool.Options.Instance
// name:
//
//	inv, err := redispool.New(rdb, redispool.Options{Prefix: "warm"})
//	p, err := pool.New(prov, pool.Options{MinIdle: 2, MaxIdle: 10, Inventory: inv, Instance: hostname})
//
// Then an idle item is handed to exactly one holder in the fleet (an atomic
// pop in a Lua script), the warm target and the idle limit count every
// instance's items, every item in use is registered under its instance so
// that reconciliation on any instance leaves it alone, and the records of an
// instance that crashed expire (Redis key expiry, on the server's clock)
// instead of protecting its items forever: reconciliation then destroys
// them as orphans.
//
// A call that changes the pool keeps its outcome, so that go-redis's resend
// of the same call after a broken connection (or the Inventory's own, see
// Options.Resends) answers with it instead of acting twice; once the call
// has returned, a later call of the same Inventory deletes it. A call the
// server refuses without running it because of a Redis Cluster (TRYAGAIN,
// CLUSTERDOWN, a MOVED or ASK past go-redis's redirections) or a restart
// (LOADING, READONLY) is sent again, 2 ms apart doubling to 100 ms, for up
// to 5 s or until its context ends.
//
// Scripts call TIME before writing, which Redis allows with effects
// replication: the default since Redis 5 and the only mode since Redis 7.
// So the package needs Redis 5 or later.
//
// # Redis Cluster
//
// All keys of an Inventory are in one hash slot (see Options.Prefix and
// Keys), so the package works through a go-redis *redis.ClusterClient as
// through a client of one server. This is what holds there, as the tests
// prove with a fleet of three pools on a cluster of three masters with a
// replica each (cluster-node-timeout 1 s):
//
//   - Resharding. Every key a script touches is declared, and every script
//     also declares a key named "guard" under the prefix that is never
//     written, so that while the slot moves to another master the cluster
//     refuses the scripts whole and the Inventory sends them again until
//     the migration is over: calls wait instead of failing (a migration
//     longer than 5 s makes them fail). The slot holds the Inventory's six
//     keys whatever the load. Proven: no call fails and no item is handed
//     to two holders while the slot moves again and again.
//   - Graceful failover (CLUSTER FAILOVER on a replica): nothing is lost
//     and no call fails.
//   - Hard failover (a master dies; its replica is promoted after
//     cluster-node-timeout and an election): calls fail from the master's
//     death until the promotion, cluster-node-timeout plus one to three
//     seconds, and then for at most a few hundred milliseconds: the
//     Inventory has the client reload the cluster's layout after every
//     failed call. Give OrphanGracePeriod and the pool's create timeouts
//     room for that window and for a migration.
//   - Without WaitReplicas, replication is asynchronous, and a failover can
//     undo what the dead master acknowledged in its last moments: a Pop
//     (the item is idle again, and another instance can be handed the item
//     its holder still uses), a Put (the item shows as still held, until
//     its record expires and reconciliation destroys it as an orphan), an
//     Add (the item's record is gone: reconciliation destroys it once the
//     orphan grace has passed). Nothing in Redis tells that this happened.
//   - With WaitReplicas set to the number of replicas of each master,
//     every call that changes the pool waits until the replicas have it,
//     so a replica that takes over has every change a caller was told of.
//     Proven: no item handed to two holders across a hard failover in
//     which the master's last writes reached no replica. The price is a
//     round trip to the replicas on every change, and availability: while
//     a master has no replica in sync (after a failover, until the dead
//     node is back as a replica) every change fails after WaitTimeout with
//     ErrNotReplicated, and Acquire with it.
//
// Client settings as for lease/redislease (see its "Redis Cluster"):
// DialerRetries 1, DialTimeout about 1 s, ReadTimeout above WaitTimeout,
// an Addrs slice of its own for each client.
package redispool
