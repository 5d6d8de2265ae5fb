// Package ttlkit is a library of time-bound resource primitives: things that
// are slow to create and must be kept warm, leases that die unless
// heartbeated, state that moves on after a period of inactivity, keys that
// expire, and admission that closes under load and reopens only after a calm
// hold.
//
// This package holds no code; it is the map of the library. Each primitive
// lives in its own package, with an in-memory implementation that needs
// nothing but the standard library, and backends in subpackages (Redis,
// PostgreSQL, MySQL/MariaDB) for programs that run several instances:
//
//   - [github.com/ttlkit/ttlkit/hysteresis]: a Gate over named signals that
//     trips at once and reopens only after every signal stayed calm for a
//     hold time; stale signals never count as calm.
//   - [github.com/ttlkit/ttlkit/hysteresis/sysload]: CPU, memory and swap from
//     /proc or cgroup v2 limits, and a Monitor that feeds a Gate.
//   - [github.com/ttlkit/ttlkit/expiry]: Redis-style key expiry: a sharded
//     Map[K,V] with passive expiry on access and an Expirer that samples keys
//     with a deadline under a time budget, over the Map or any Keyspace.
//   - [github.com/ttlkit/ttlkit/lease]: leases on a weighted budget with an
//     absolute TTL, heartbeat grace, one lease per holder, typed rejections,
//     fencing tokens and KeepAlive; an in-memory Store.
//   - [github.com/ttlkit/ttlkit/lease/redislease]: a lease Store on Redis, one
//     Lua script per operation on the server's clock.
//   - [github.com/ttlkit/ttlkit/lease/sqllease]: a lease Store on PostgreSQL
//     and MySQL/MariaDB, one locked transaction per grant on the database's
//     clock.
//   - [github.com/ttlkit/ttlkit/lease/leasehttp]: leases for browsers: an
//     http.Handler for grant, heartbeat, release and status with stable JSON
//     error codes, and a small JavaScript client that heartbeats.
//   - [github.com/ttlkit/ttlkit/lease/leasetest]: the conformance suite every
//     lease Store passes.
//   - [github.com/ttlkit/ttlkit/pool]: Pool[T] and Group[K,T], warm pools with
//     FIFO waits, lifetime and idle expiry, health checks, reconciliation
//     against the provider and draining.
//   - [github.com/ttlkit/ttlkit/pool/redispool]: a Redis Inventory, so that
//     several processes share one warm pool.
//   - [github.com/ttlkit/ttlkit/pool/pooltest]: the conformance suite for
//     pool Inventory implementations.
//   - [github.com/ttlkit/ttlkit/ttl]: activity-driven TTL state machines: a
//     zero-allocation activity Tracker, an optional Buffer, a Store as the
//     source of truth and a Runner that applies phase Rules and wakes a
//     controller.
//   - [github.com/ttlkit/ttlkit/ttl/redisttl]: the activity Buffer as a Redis
//     sorted set (ZADD GT, a drain that loses no concurrent update).
//   - [github.com/ttlkit/ttlkit/ttl/pgttl]: the ttl Store on PostgreSQL (bulk
//     unnest/GREATEST sync, rules on now(), LISTEN/NOTIFY wake).
//   - [github.com/ttlkit/ttlkit/ttl/ttltest]: conformance suites for ttl Stores
//     and Buffers.
//
// Conventions shared by every package: an Options struct whose zero value
// means the defaults, validated by New with errors that name the field;
// Options.Clock (github.com/benbjohnson/clock) for time; every background loop
// has a public synchronous step (Sweep, Cycle, Tick, Reconcile, Flush) that
// tests and users can call by hand; Close stops and waits for every goroutine
// a type started; Stats returns a snapshot of counters; OnEvent callbacks run
// outside locks. Distributed backends take time from the server, never from
// the client.
//
// Runnable programs built on the packages are in the examples directory:
// examples/cameras is a camera admission server (leases for live streams from
// a shared budget, heartbeated by a web page, behind an overload gate),
// examples/loadwatch watches this machine through a camera server's load
// gate, and examples/kvserver is a Redis-compatible server on expiry.Map.
package ttlkit
