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
