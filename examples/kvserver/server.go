package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttlkit/ttlkit/expiry"
)

// Errors of Serve and ServeConn.
var (
	// ErrServerClosed is returned by Serve and ServeConn after Close.
	ErrServerClosed = errors.New("kvserver: server closed")
	// ErrTooManyClients is returned by ServeConn when MaxClients
	// connections are open already.
	ErrTooManyClients = errors.New("kvserver: max number of clients reached")
)

// numDBs is the number of databases, as Redis's default "databases 16".
const numDBs = 16

// keyspace is one database.
type keyspace = *expiry.Map[string, string]

// Server answers the Redis protocol (RESP2) on 16 databases.
//
// Redis runs one command at a time, so that a command that reads and then
// writes (SET NX, SET GET, MSET, EXPIRE GT) is atomic. The Server gets the
// same effect with a readers-writer lock split in shards: commands that
// are one atomic operation of the keyspace share it (each connection takes
// the read side of its own shard only, so they run in parallel without
// touching a common cache line), and commands that read then write, or
// touch several keys, take every shard exclusively.
type Server struct {
	dbs   [numDBs]keyspace
	cfg   Config
	log   *slog.Logger
	start time.Time

	// locks order commands on the keyspace; see the type's doc.
	locks [8]paddedRWMutex
	// watch indexes the keys that clients WATCH.
	watch watchers
	// ps indexes pub/sub subscriptions.
	ps pubsub
	// notifyFlags is notify-keyspace-events, parsed.
	notifyFlags atomic.Int32
	// interval is the expiry cycle's interval (CONFIG SET hz changes
	// it), in nanoseconds; intervalChanged tells the cycle.
	interval        atomic.Int64
	intervalChanged chan struct{}
	// stats counts each command's calls, by command.idx.
	stats []cmdStats
	// maxClients is Config.MaxClients, or what CONFIG SET made it.
	maxClients atomic.Int64

	connMu    sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	clients   map[*client]struct{} // under connMu
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	stop      chan struct{} // closed by Close: stops the memory returner
	parker    *parker       // holds accepted connections that have sent nothing yet; nil: none; under connMu

	nextID       atomic.Int64
	connections  atomic.Int64
	commands     atomic.Int64 // added per flush, not per command
	expiredOnSet atomic.Uint64
	// expiry is the keyspaces' active expiry tuning, defaults filled in.
	expiry expiry.Options

	// activeOff is set by DEBUG SET-ACTIVE-EXPIRE 0.
	activeOff atomic.Bool
	// bigFreed counts bytes of large values deleted since the memory
	// returner last gave memory back to the operating system.
	bigFreed atomic.Int64
}

type paddedRWMutex struct {
	sync.RWMutex
	_ [40]byte
}

// New returns a Server with empty databases whose active expiry runs with
// cfg.Expiry. Close stops it. A negative limit is an error that names the
// field.
func New(cfg Config) (*Server, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxClients", int64(cfg.MaxClients)},
		{"Limits.MaxBulkLen", cfg.Limits.MaxBulkLen},
		{"Limits.MaxArgs", int64(cfg.Limits.MaxArgs)},
		{"Limits.MaxInline", int64(cfg.Limits.MaxInline)},
		{"Limits.MaxQueryLen", cfg.Limits.MaxQueryLen},
	} {
		if f.v < 0 {
			return nil, fmt.Errorf("kvserver: %s (%d) is negative", f.name, f.v)
		}
	}
	s := &Server{
		start:     time.Now(),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
		clients:   make(map[*client]struct{}),
		stats:     make([]cmdStats, numCommands),
		stop:      make(chan struct{}),
	}
	// One goroutine of the server runs active expiry over all databases
	// (activeExpire), as Redis's cron does, rather than one per database;
	// it is also what DEBUG SET-ACTIVE-EXPIRE switches. The keyspaces run
	// no loop of their own (a negative Interval), and their Budget is a
	// share of the server's interval.
	opts, interval, err := expiryOptions(cfg.Expiry)
	if err != nil {
		return nil, err
	}
	for i := range s.dbs {
		db, err := expiry.NewMap(expiry.MapOptions[string, string]{Options: opts, OnEvent: s.onExpired(i)})
		if err != nil {
			for _, d := range s.dbs[:i] {
				_ = d.Close(context.Background())
			}
			return nil, fmt.Errorf("kvserver: %w", err)
		}
		s.dbs[i] = db
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	s.log = cfg.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cfg = cfg
	s.expiry = opts
	s.maxClients.Store(int64(cfg.MaxClients))
	s.interval.Store(int64(interval))
	s.intervalChanged = make(chan struct{}, 1)
	s.wg.Add(1)
	go s.returnMemory()
	if cfg.Expiry.Interval >= 0 {
		s.wg.Add(1)
		go s.activeExpire()
	}
	return s, nil
}

// db returns the client's selected database.
func (s *Server) db(cl *client) keyspace { return s.dbs[cl.db] }

// Serve accepts connections on ln and serves each on its own goroutine until
// Close. It always returns a non-nil error: ErrServerClosed after Close, or
// the error of a listener that someone else closed; other accept errors
// (such as running out of file descriptors) are retried with a backoff.
// Serve closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	if s.parker == nil {
		// Started by the first Serve, not by New: a server that only
		// serves connections handed to ServeConn runs no epoll loop.
		s.parker = newParker(s.serveConn)
	}
	parker := s.parker
	s.connMu.Unlock()
	defer func() {
		s.connMu.Lock()
		delete(s.listeners, ln)
		s.connMu.Unlock()
		_ = ln.Close()
	}()

	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("kvserver: accept", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		switch s.track(c) {
		case trackClosed:
			_ = c.Close()
			return ErrServerClosed
		case trackFull:
			// Redis's answer past maxclients; the write cannot block for
			// long on a fresh connection's empty send buffer.
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.Write([]byte("-ERR max number of clients reached\r\n"))
			_ = c.Close()
			continue
		}
		// A new connection waits for its first command in the parker,
		// without a goroutine, where it can; one that protected mode
		// refuses is told so at once.
		if s.protects(c) || !parker.park(c) {
			go s.serveConn(c)
		}
	}
}

// ServeConn serves one connection that the caller accepted (or made with
// net.Pipe) until the client quits or goes away or the server is closed.
// It returns ErrServerClosed or ErrTooManyClients, having closed c, when the
// server is closed or full, and nil otherwise.
func (s *Server) ServeConn(c net.Conn) error {
	switch s.track(c) {
	case trackClosed:
		_ = c.Close()
		return ErrServerClosed
	case trackFull:
		_ = c.Close()
		return ErrTooManyClients
	}
	s.serveConn(c)
	return nil
}

func (s *Server) isClosed() bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return s.closed
}

type trackResult int

const (
	tracked trackResult = iota
	trackClosed
	trackFull
)

// track registers c unless the server is closing or has MaxClients
// connections already.
func (s *Server) track(c net.Conn) trackResult {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	switch {
	case s.closed:
		return trackClosed
	case int64(len(s.conns)) >= s.maxClients.Load():
		return trackFull
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.connections.Add(1)
	return tracked
}

// Close stops accepting, closes every connection, waits for their
// goroutines and closes the keyspace, which stops active expiry. It is
// idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.connMu.Lock()
		s.closed = true
		for ln := range s.listeners {
			_ = ln.Close()
		}
		parker := s.parker
		s.connMu.Unlock()
		parked := parker.stop() // no goroutine serves these
		s.connMu.Lock()
		for _, c := range parked {
			delete(s.conns, c)
			_ = c.Close()
			s.wg.Done()
		}
		for c := range s.conns {
			_ = c.Close()
		}
		s.connMu.Unlock()
		close(s.stop)
		s.wg.Wait()
		var errs []error
		for _, db := range s.dbs {
			errs = append(errs, db.Close(context.Background()))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// client is one connection's state.
type client struct {
	id     int64
	conn   net.Conn
	r      *Reader
	w      *Writer
	name   string
	db     int
	authed bool
	quit   bool
	txn    txn

	// out is held while the connection's goroutine writes replies and
	// while its pusher writes messages, so that neither splits the other.
	out sync.Mutex
	// box, subs and psubs exist once the client has subscribed.
	box   *outbox
	subs  map[string]struct{}
	psubs map[string]struct{}

	clientState
}

func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.connMu.Lock()
		delete(s.conns, c)
		s.connMu.Unlock()
		_ = c.Close()
	}()
	if s.protects(c) {
		s.log.Debug("kvserver: protected mode refused a connection", "remote", c.RemoteAddr())
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write([]byte("-" + errDenied + "\r\n"))
		// Take the client's first command, briefly, so that the error
		// arrives as its reply rather than after a reset connection.
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Read(make([]byte, 512))
		return
	}
	cl := &client{
		id:     s.nextID.Add(1),
		conn:   c,
		r:      NewReader(c, s.cfg.Limits),
		w:      NewWriter(c),
		authed: s.cfg.RequirePass == "",
	}
	cl.r.wait = readableWaiter(c)
	pending := int64(0) // commands not yet added to s.commands
	flush := func() error {
		s.commands.Add(pending)
		pending = 0
		return cl.w.Flush()
	}
	defer func() { s.commands.Add(pending) }()
	s.register(cl)
	defer s.deregister(cl)
	defer s.unwatch(cl)
	defer s.stopPushes(cl)
	for !cl.quit {
		args, err := cl.r.ReadCommand()
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				s.log.Debug("kvserver: closing connection", "remote", c.RemoteAddr(), "err", err)
				cl.out.Lock() // a subscriber's pusher writes too
				cl.w.Error("ERR " + pe.Error())
				_ = flush()
				cl.out.Unlock()
			}
			return
		}
		if crossProtocol(args, cl.r.Inline()) {
			// Whatever follows on this connection is a browser's
			// request, not a client's: run none of it.
			s.log.Warn("kvserver: possible SECURITY ATTACK detected. It looks like somebody is sending "+
				"an HTTP request to this server. This is likely due to an attacker attempting to use "+
				"Cross Protocol Scripting to compromise it. Connection aborted.", "remote", c.RemoteAddr())
			return
		}
		pending++
		cl.out.Lock()
		undo := cl.silence()
		s.dispatch(cl, args)
		if undo != nil {
			undo()
		}
		cl.publishInfo()
		// Flush once the pipeline is drained, so that a batch of commands
		// gets its replies in one write, or once enough replies are
		// waiting. dispatch has released the keyspace lock by now, so a
		// client that does not read stalls only its own connection.
		err = nil
		if cl.quit || cl.r.Buffered() == 0 || cl.w.Buffered() >= flushAt {
			err = flush()
		}
		cl.out.Unlock()
		if err != nil {
			return
		}
	}
}

// crossProtocol reports whether a command is a line of an HTTP request, which
// a web page can make a browser send to any port (a form or a fetch whose
// body is RESP): Redis's POST and Host: commands, and, inline, a request line
// ("GET / HTTP/1.1", or HTTP/2's "PRI * HTTP/2.0"), which Redis would answer with an arity error before
// reading the headers.
func crossProtocol(args [][]byte, inline bool) bool {
	name := args[0]
	if len(name) == 4 && bytes.EqualFold(name, []byte("post")) || len(name) == 5 && bytes.EqualFold(name, []byte("host:")) {
		return true
	}
	if !inline || len(args) != 3 || !bytes.HasPrefix(args[2], []byte("HTTP/")) {
		return false
	}
	switch string(name) {
	case "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE", "PRI":
		return true
	}
	return false
}

// protects reports whether protected mode refuses c: no password is set,
// protected mode is on and the client is on another host.
func (s *Server) protects(c net.Conn) bool {
	return s.cfg.RequirePass == "" && !s.cfg.DisableProtectedMode && !isLocal(c.RemoteAddr())
}

// errDenied is the error a client from another host gets in protected
// mode, before the server closes its connection (Redis's DENIED).
const errDenied = "DENIED kvserver is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from other computers, either set a password with -requirepass (clients then send AUTH), or, on a network you trust, start kvserver with -protected-mode=false."

// isLocal reports whether a client's address is on this host: a loopback
// IP address, a Unix socket or an in-process pipe.
func isLocal(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return a == nil || a.Network() == "pipe"
}

// DefaultMaxClients is Config.MaxClients's default.
const DefaultMaxClients = 10000

// Config configures a Server. The zero value is usable.
type Config struct {
	// Limits bound what one request may allocate.
	Limits Limits
	// MaxClients caps the open connections; one more gets Redis's "max
	// number of clients reached" error and is closed. Default 10000, as
	// Redis's maxclients.
	MaxClients int
	// RequirePass, if set, is the default user's password (Redis's
	// requirepass): a client must AUTH before any command but AUTH,
	// HELLO and QUIT, which otherwise get NOAUTH.
	RequirePass string
	// DisableProtectedMode lets clients on other hosts in although no
	// password is set. By default, as Redis's protected mode, a server
	// without RequirePass answers a client whose address is not loopback
	// with a DENIED error and closes the connection.
	DisableProtectedMode bool
	// Expiry tunes the keyspace's active expiry; its Clock, if set, is
	// also the server's clock for EXPIRE, TTL, SET EX and TIME. Unset
	// fields take a mini Redis's tuning: a cycle every second (Interval),
	// 20 keys a round, repeat above 25 % (Threshold), at most a quarter of
	// the interval per cycle (Budget). A negative Interval runs no active
	// expiry.
	Expiry expiry.Options
	// Logger receives connection errors at debug level; nil discards them.
	Logger *slog.Logger

	// HTTPAddr is where the command serves /healthz and /metrics (see
	// Server.Registry); "" serves neither. New ignores it.
	HTTPAddr string
	// AllowedHosts are the names the HTTP server answers to besides
	// loopback names and addresses (a DNS rebinding page's name is not
	// one of them).
	AllowedHosts []string
}

// expiryOptions returns the keyspaces' options for the server's tuning o
// (see Config.Expiry) and the interval of the server's expiry cycle.
func expiryOptions(o expiry.Options) (expiry.Options, time.Duration, error) {
	interval := cmp.Or(o.Interval, time.Second)
	base := interval // what Budget is a share of
	if base < 0 {
		base = time.Second
	}
	if o.Threshold == 0 {
		o.Threshold = 0.25
	}
	if o.Budget == 0 {
		o.Budget = base / 4
	}
	if o.Budget > base {
		return o, 0, fmt.Errorf("kvserver: expiry: Budget (%v) is above Interval (%v): %w", o.Budget, base, expiry.ErrInvalid)
	}
	o.Interval = -1
	return o, base, nil
}

func (s *Server) now() time.Time {
	if c := s.cfg.Expiry.Clock; c != nil {
		return c.Now()
	}
	return time.Now()
}

// port returns the TCP port of the first listener, for INFO.
func (s *Server) port() int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for ln := range s.listeners {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			return a.Port
		}
	}
	return 0
}
