// Package ttltest holds the conformance suites that every ttl.Store and
// ttl.Buffer must pass, RunStore and RunBuffer, run from a backend's tests:
//
//	func TestConformance(t *testing.T) {
//		ttltest.RunBuffer(t, ttltest.BufferHarness{New: func(*testing.T) ttl.Buffer { return newBuffer() }})
//		ttltest.RunStore(t, ttltest.StoreHarness{New: newStore, Create: insertRows, Get: selectRow})
//	}
//
// A Store's harness writes and reads the entities (an Entity per row), which
// ttl.Store leaves to the system that owns them. ttl's MemoryBuffer,
// ttl/pgttl and ttl/redisttl run the suites, and so can third-party
// backends: the package imports only the standard library and ttl.
//
// The suites never wait for time to pass. They create entities with
// timestamps in the past ("last active 11 minutes ago") relative to the
// store's now and use rules with minute-sized margins, so a store on a real
// database server, which decides with its own clock, runs the whole suite in
// a few seconds, and clock skew or a slow machine below a minute cannot make
// it flaky.
package ttltest
