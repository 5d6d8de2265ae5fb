//go:build !linux

package main

import "net"

// parker is only implemented on Linux; elsewhere every connection gets its
// goroutine when it is accepted.
type parker struct{}

func newParker(func(net.Conn)) *parker { return nil }

func (*parker) park(net.Conn) bool { return false }

func (*parker) stop() []net.Conn { return nil }
