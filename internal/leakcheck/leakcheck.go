// Package leakcheck is the goroutine-leak check that every ttlkit package
// with goroutines runs from its TestMain.
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyTestMain runs the package's tests and then fails the test binary if
// any goroutine started by them is still running. Use it as the whole body of
// TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, opts...)
}

// IgnoreRedisRedial is an option for VerifyTestMain in packages whose
// tests kill Redis servers: once a go-redis client has failed to dial a
// server as many times as its pool has connections, a goroutine of the
// pool dials it again every second, and after the client is closed it
// stops only at its next attempt, up to a second later.
var IgnoreRedisRedial = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
