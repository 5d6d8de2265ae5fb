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
//   - [github.com/ttlkit/ttlkit/hysteresis]: a Gate over named signals with
//     warn, trip and recover thresholds and a hold time, so admission does
//     not flap.
//   - [github.com/ttlkit/ttlkit/hysteresis/sysload]: samples CPU, memory and
//     swap (cgroup v2 aware) and feeds a Gate.
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
// Runnable programs built on the packages are in the examples directory.
package ttlkit
