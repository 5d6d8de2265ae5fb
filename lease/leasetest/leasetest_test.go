package leasetest_test

import "testing"

// TestMemory runs the suite on the in-memory store, so the suite itself is
// exercised by this package's tests.
func TestMemory(t *testing.T) { conformance(t) }
