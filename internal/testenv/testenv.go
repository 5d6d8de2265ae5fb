// Package testenv opens the real backends that ttlkit's tests run against,
// with one policy for all of them.
//
// Each backend is named by an environment variable:
//
//	TTLKIT_TEST_REDIS_URL     redis://127.0.0.1:6379/0
//	TTLKIT_TEST_POSTGRES_URL  postgres://root@127.0.0.1:5432/test?sslmode=disable
//	TTLKIT_TEST_MYSQL_DSN     root@tcp(127.0.0.1:3306)/test?parseTime=true
//	TTLKIT_TEST_REDIS_CLUSTER 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
//
// The last names some nodes of a Redis Cluster (OpenRedisCluster); it also
// enables the tests that start a cluster of their own (StartRedisCluster).
//
// An unset variable skips the test. TTLKIT_REQUIRE_BACKENDS=1 turns an unset
// variable or an unreachable backend into a test failure, so that a CI run
// cannot pass by skipping.
//
// Every test gets its own namespace (a Redis key prefix, a PostgreSQL schema,
// a MySQL database) that is removed when the test ends, so tests can run in
// parallel against one server and leave it as they found it.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"
)

// Environment variables read by this package.
const (
	EnvRedis        = "TTLKIT_TEST_REDIS_URL"
	EnvRedisCluster = "TTLKIT_TEST_REDIS_CLUSTER"
	EnvPostgres     = "TTLKIT_TEST_POSTGRES_URL"
	EnvMySQL        = "TTLKIT_TEST_MYSQL_DSN"
	EnvRequire      = "TTLKIT_REQUIRE_BACKENDS"
)

// ConnectTimeout bounds the reachability check of each backend.
const ConnectTimeout = 5 * time.Second

// Required reports whether TTLKIT_REQUIRE_BACKENDS=1 is set, that is whether a
// missing or unreachable backend fails the test instead of skipping it.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Unavailable skips t, or fails it when backends are required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("testenv: "+format+" (and "+EnvRequire+"=1)", args...)
	}
	t.Skipf("testenv: "+format, args...)
}

// Lookup returns the value of the environment variable name, or skips or
// fails t when it is unset.
func Lookup(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Unavailable(t, "%s is not set", name)
	}
	return v
}

// UniqueName returns a fresh name "ttlkit_t_<16 hex digits>", valid as a
// Redis key part, a PostgreSQL schema and a MySQL database name.
func UniqueName() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("testenv: " + err.Error())
	}
	return "ttlkit_t_" + hex.EncodeToString(b[:])
}

// CleanupContext is the context for cleanup work, which runs after the test's
// own context has been cancelled.
func CleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}
