package main

import (
	"errors"
	"net"
	"syscall"
	"time"
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

// hangupWatcher returns a function that blocks until the peer of c hangs
// up or c fails or is closed (true), or until stop is closed (false),
// without taking any byte the client sent. Nil if c is not a socket. Bytes
// the client sent meanwhile (commands pipelined after a blocking one) are
// left for the connection's reader; while they wait, a hang-up is looked
// for every 100 ms.
func hangupWatcher(c net.Conn) func(stop <-chan struct{}) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(stop <-chan struct{}) bool {
		for {
			pending := false
			gone := false
			err := rc.Read(func(fd uintptr) bool {
				var b [1]byte
				n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				switch {
				case err == syscall.EAGAIN:
					return false // nothing yet: let the poller wait
				case err != nil || n == 0:
					gone = true // an error, or the peer's end of stream
				default:
					pending = true
				}
				return true
			})
			if gone || err != nil && !isTimeout(err) {
				return true
			}
			select {
			case <-stop:
				return false
			default:
			}
			if pending {
				t := time.NewTimer(100 * time.Millisecond)
				select {
				case <-stop:
					t.Stop()
					return false
				case <-t.C:
				}
			}
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
