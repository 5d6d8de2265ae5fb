// Package expiry benchmarks ttlkit's expiry.Map against ttlcache, otter and
// go-cache: Set and Get throughput, and how fast each reclaims expired keys
// nobody reads and how long a Get can stall while a million keys expire at
// once.
//
// The reclaim and pause benchmarks use 1M keys only when TTLKIT_BENCH_FULL=1;
// otherwise they use a small keyspace and short TTLs so that CI's
// -benchtime 1x run stays quick.
package expiry
