//go:build !linux

package main

import "net"

// readableWaiter is only implemented on Linux; elsewhere an idle
// connection keeps its read buffer.
func readableWaiter(net.Conn) func() { return nil }

// hangupWatcher is only implemented on Linux.
func hangupWatcher(net.Conn) func(stop <-chan struct{}) bool { return nil }
