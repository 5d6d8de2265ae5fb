// Package redislease is a lease.Store on Redis, shared by any number of
// lease.Managers in any number of processes.
//
// Every operation is one round trip: a Lua script run with EVALSHA (EVAL
// when the server has not cached it yet) that takes the time from the
// server's TIME, so clients' clocks never matter, and decides atomically.
// A grant checks the gate verdict, the holder rule and the budget in one
// script and takes its fencing token from INCR in the same script, so
// Managers sharing a store can never oversubscribe the budget, give a holder
// two live leases, or issue one token twice.
//
// # Data
//
// All keys share one Redis Cluster hash slot (see Options.Prefix):
//
//	leases     HASH    id → record (holder, resource, cost, token, times)
//	deadlines  ZSET    live lease ids by deadline
//	expired    ZSET    expired, not yet swept lease ids
//	holders    ZSET    live leases by holder (lexicographic index)
//	used       STRING  units taken by live leases
//	token      STRING  last fencing token
//
// Each script first moves the leases whose deadline has passed from
// deadlines to expired and takes their units out of used, so an expired
// lease is absent for reads and the budget at once; Sweep then removes
// expired records, each exactly once however many sweepers run.
//
// # Failures
//
// Errors from Redis are wrapped and never match the lease sentinels: the
// operation may or may not have taken effect. go-redis retries a command
// when the connection breaks; a repeated Grant returns the lease the first
// attempt granted (ids are unique per grant), so a retry never grants twice
// nor reports a rejection for a grant that took effect. A repeated Release
// or Sweep returns the reply of the attempt that took effect, which it kept
// for a minute in a receipt key named by a per-call nonce. A Sweep batch is
// lost (never reported, its expired events missing) only when every attempt
// of the call fails; set the client's MaxRetries to -1 to see such calls
// fail at once instead.
//
// Scripts call TIME before writing, which Redis allows with effects
// replication: the default since Redis 5 and the only mode since Redis 7.
// So the store needs Redis 5 or later.
package redislease
