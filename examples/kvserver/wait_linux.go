package main

import (
	"net"
	"syscall"
)

// readableWaiter returns a function that blocks until c has data to read
// (or is closed, or fails) without holding a buffer, so that an idle
// connection costs no read buffer: it peeks at one byte without taking it
// and lets the runtime's poller wait while there is none. Nil if c is not
// a socket.
func readableWaiter(c net.Conn) func() {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() {
		// Errors are left for the Read that follows to report.
		_ = rc.Read(func(fd uintptr) bool {
			var b [1]byte
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return err != syscall.EAGAIN
		})
	}
}
