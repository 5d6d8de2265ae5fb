// Package ttlkit is a library of time-bound resource primitives: things that
// are slow to create and must be kept warm, leases that die unless
// heartbeated, state that moves on after a period of inactivity, keys that
// expire, and admission that closes under load and reopens only after a calm
// hold.
//
// This package holds no code; it is the map of the library. Each primitive
// lives in its own package, with an in-memory implementation that needs
// nothing but the standard library, and backends in subpackages (Redis,
// PostgreSQL, MySQL/MariaDB, Docker) for programs that run several
// instances. The primitives are this module, which requires only clock,
// testify and goleak; each backend is a module of its own in its package's
// directory, so a program's module graph holds only the drivers it uses:
//
//   - [github.com/ttlkit/ttlkit/hysteresis]: a Gate over named signals that
//     trips at once and reopens only after every signal stayed calm for a
//     hold time; stale signals never count as calm.
//   - [github.com/ttlkit/ttlkit/hysteresis/sysload]: CPU, memory and swap from
//     /proc or cgroup v2 limits, and a Monitor that feeds a Gate.
//   - [github.com/ttlkit/ttlkit/expiry]: Redis-style key expiry: a sharded
//     Map[K,V] with passive expiry on access and an Expirer that samples keys
//     with a deadline under a time budget (Redis's algorithm and defaults),
//     the Map's own or over any Keyspace.
//   - [github.com/ttlkit/ttlkit/lease]: leases on a weighted budget with an
//     absolute TTL, heartbeat grace, one lease per holder, typed rejections,
//     fencing tokens and KeepAlive; an in-memory Store (NewMemoryStore).
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
//   - [github.com/ttlkit/ttlkit/pool/shared]: the Inventory through which
//     pools in several processes share one warm pool, and an in-memory one.
//   - [github.com/ttlkit/ttlkit/pool/redispool]: a Redis Inventory, so that
//     several processes share one warm pool.
//   - [github.com/ttlkit/ttlkit/pool/pooltest]: the conformance suite for
//     Inventory implementations.
//   - [github.com/ttlkit/ttlkit/pool/probe]: readiness and health probes (TCP,
//     HTTP 2xx, any function) with a deadline and backoff.
//   - [github.com/ttlkit/ttlkit/pool/process]: a Provisioner of local worker
//     processes, each on a port of its own, found again by label after a
//     crash of their owner.
//   - [github.com/ttlkit/ttlkit/pool/docker]: a Provisioner of Docker
//     containers with limits and security options.
//   - [github.com/ttlkit/ttlkit/pool/provisionertest]: the conformance suite
//     for provisioners that list what exists.
//   - [github.com/ttlkit/ttlkit/ttl]: activity-driven TTL state machines: a
//     zero-allocation activity Tracker, an optional Buffer, a Store (the
//     user's table: merge activity, apply a rule) as the source of truth
//     and a Runner that applies phase Rules and wakes a controller.
//   - [github.com/ttlkit/ttlkit/ttl/redisttl]: the activity Buffer as a Redis
//     sorted set (ZADD GT, a drain that loses no concurrent update).
//   - [github.com/ttlkit/ttlkit/ttl/pgttl]: the ttl Store on a PostgreSQL
//     table (bulk unnest/GREATEST merge, rules on now()).
//   - [github.com/ttlkit/ttlkit/ttl/ttltest]: conformance suites for ttl Stores
//     and Buffers.
//   - [github.com/ttlkit/ttlkit/metrics]: Prometheus collectors over the
//     Stats of pools, pool groups, lease Managers, ttl Trackers and Runners,
//     expiry Maps and Expirers and hysteresis Gates; a module of its own, so
//     that only programs that export to Prometheus require its client.
//
// # Conventions
//
// Every package follows the same rules, so a user who has learned one knows
// the shape of the others.
//
//   - Options. Required values are arguments; everything else is an Options
//     struct, and the zero value of every field means the library's default,
//     which the field's documentation states ("Zero means 1 minute."). A
//     duration that can be switched off — a background loop's interval, a
//     grace period, an idle timeout — is switched off by a negative value;
//     zero never means "off". No default is an exported constant. New
//     validates the options and returns an error that names the field the
//     user set and its value ("pool: MinIdle (5) > MaxSize (2)") and matches
//     the package's ErrInvalid with errors.Is; bad arguments to any method get
//     the same kind of error and change nothing.
//   - Time. Options.Clock (github.com/benbjohnson/clock) is the source of
//     time; nil means real time. Backends shared by several processes take the
//     time from the server (Redis TIME, SQL now()), never from the client.
//   - Events. Options.OnEvent receives the package's Event: the Time on the
//     owner's clock and the event's data, and, where a package reports
//     several kinds of event (pool, lease, ttl), a Kind (EventKind, an int
//     whose constants are named Event<Name> and whose String is a stable
//     lower_snake name for logs and metric labels); a package with one kind
//     (expiry: a key expired; hysteresis: the gate changed state) has no
//     Kind. A Reason, where an
//     event has one, says why it happened; it is always a string type whose
//     constants are named Reason<Name> and whose values are stable
//     lower_snake words. Events are delivered asynchronously, in order, on one
//     goroutine per owner, outside every lock, through a queue of
//     Options.EventQueue events (zero means 1024): the hot paths that
//     emit them (Acquire, Grant, Get, Record, Observe) never wait for user
//     code, and a callback may call its owner without deadlocking. A full
//     queue drops the event and counts it in Stats().EventsDropped. A
//     callback that panics is recovered and logged with its stack, and the
//     next event is delivered as usual.
//   - Stats. Stats() returns a snapshot struct: counters are uint64 and only
//     grow, gauges are int.
//   - Verbs. One method per action: an operation that needs a variant
//     takes an argument or an option, not a second method.
//   - Steps. Every background loop has a public synchronous step that the
//     loop runs on a ticker and that users and tests can run by hand, with one
//     shape: Step(ctx) (StepResult, error), where the result counts what the
//     step did (lease's Manager.Sweep, expiry's Expirer.Cycle, ttl's
//     Runner.Tick and Tracker.Flush, pool's janitor steps).
//   - Close. A type that starts goroutines has Close(ctx) error. It stops
//     them, delivers the queued events and waits until everything has stopped
//     or ctx ends; then it returns an error that wraps context.Cause(ctx) and
//     says what is still running. Close is idempotent. After Close, a call
//     that needs what Close stopped returns the package's ErrClosed (a
//     pool's Acquire, a lease Manager's Grant); what needs no background
//     work keeps working: Stats, reads of state, an expiry.Map's Get and Set,
//     a step run by hand. Events are no longer delivered.
//   - Errors. One sentinel error per condition (errors.Is); an error type
//     only where the error carries data (errors.As), and it matches its
//     condition's sentinel, never a second name for it. Backend errors are wrapped with the operation, and a
//     call ended by its context reports context.Cause(ctx) too.
//   - Conformance. Each backend interface has an exported suite,
//     Run(t, Harness) (ttltest: RunStore and RunBuffer), whose Harness.New
//     returns a fresh, isolated instance; optional Harness fields enable the
//     subtests that need them. A third-party backend runs the same suite.
//
// Runnable programs built on the packages are in the examples directory:
// examples/cameras is a camera admission server (leases, a budget, an
// overload gate, a web page that heartbeats); examples/gateway is a
// serverless gateway of Lambda runtimes in pooled workers;
// examples/sandboxes gives each conversation of an AI assistant a sandbox
// from a warm pool shared through Redis; examples/kvserver
// is a Redis-compatible server on expiry.Map; examples/loadwatch watches this
// machine through the load gate; examples/workspaces is a cloud-IDE workspace
// system (an activity-recording proxy, the TTL runner and the workspace
// controller) on ttl, ttl/redisttl and ttl/pgttl, its table's other
// writes in examples/entities.
package ttlkit
