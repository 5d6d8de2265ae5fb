// Package lease benchmarks ttlkit's lease.Manager over each store against the
// floor of that store: x/sync/semaphore for memory, and, in the backend
// files, redislock and round trips for Redis and SQL. The benchmarks are in
// lease_test.go; a backend file registers its stores and peers in init.
package lease
