package main

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// parker holds connections that have sent nothing yet without a goroutine
// each, as Redis holds a new client without a query buffer: one epoll
// instance watches them all, and a connection gets its goroutine when its
// first bytes (or its hang-up) arrive. A connection costs its socket and a
// map entry while it waits, instead of a goroutine's stack.
type parker struct {
	epfd  int
	wake  [2]int // a pipe whose read end stop makes readable
	serve func(net.Conn)
	done  chan struct{} // closed when run returns

	mu      sync.Mutex
	stopped bool
	conns   map[int32]net.Conn // by file descriptor
}

// newParker returns a running parker that hands each connection to serve,
// on a new goroutine, once it is readable. It returns nil if epoll is not
// available; connections are then served at once.
func newParker(serve func(net.Conn)) *parker {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	p := &parker{epfd: epfd, serve: serve, done: make(chan struct{}), conns: map[int32]net.Conn{}}
	if err := syscall.Pipe2(p.wake[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		_ = syscall.Close(epfd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(p.wake[0])}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.wake[0], &ev); err != nil {
		p.closeFDs()
		return nil
	}
	go p.run()
	return p
}

func (p *parker) closeFDs() {
	_ = syscall.Close(p.epfd)
	_ = syscall.Close(p.wake[0])
	_ = syscall.Close(p.wake[1])
}

// park adds c to the watched connections. It returns false, leaving c to
// the caller, when c is not a socket or the parker has stopped.
func (p *parker) park(c net.Conn) bool {
	if p == nil {
		return false
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	parked := false
	_ = rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(fd)}
		if syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev) == nil {
			p.conns[int32(fd)] = c
			parked = true
		}
	})
	return parked
}

// run waits for parked connections to become readable and serves them.
func (p *parker) run() {
	defer close(p.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(p.epfd, events, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// Serve every parked connection now, and park none from now on.
			p.mu.Lock()
			p.stopped = true
			for fd, c := range p.conns {
				delete(p.conns, fd)
				go p.serve(c)
			}
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			c, ok := p.conns[ev.Fd]
			if !ok {
				continue // the wake pipe
			}
			delete(p.conns, ev.Fd)
			_ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
			go p.serve(c)
		}
		p.mu.Unlock()
	}
}

// stop ends run and returns the connections still parked, which nobody
// serves: the caller closes them.
func (p *parker) stop() []net.Conn {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if p.stopped && p.conns == nil {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	left := make([]net.Conn, 0, len(p.conns))
	for _, c := range p.conns {
		left = append(left, c)
	}
	p.conns = nil
	p.mu.Unlock()
	_, _ = syscall.Write(p.wake[1], []byte{0})
	<-p.done
	p.closeFDs()
	return left
}
