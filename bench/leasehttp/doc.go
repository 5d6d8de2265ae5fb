// Package leasehttp benchmarks leases served to browsers over HTTP by
// ttlkit's lease/leasehttp, as the camera admission server serves them,
// against the same requests answered by a handler around the design's
// hand-written in-memory map (the floor for one instance in memory). The
// benchmarks are in leasehttp_test.go.
package leasehttp
