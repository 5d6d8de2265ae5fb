// Package pool benchmarks ttlkit's pool.Pool against jackc/puddle/v2,
// jolestar/go-commons-pool/v2, database/sql's connection pool and a
// buffered channel (the floor). The benchmarks are in pool_test.go.
package pool
