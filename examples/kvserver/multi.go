package main

import (
	"sync"
	"sync/atomic"
)

// Transactions: MULTI queues commands, EXEC runs them as one step, and
// WATCH makes EXEC fail when a watched key changed, as in Redis 7.
//
// A command that cannot be queued (an unknown name, a wrong number of
// arguments) flags the transaction and EXEC then runs nothing; an error
// that a queued command meets when it runs is its reply, and the others
// still run. EXEC holds the keyspace exclusively while it runs the queue.
//
// A write marks the clients that watch its key dirty (modified); a watched
// key that existed at WATCH and is gone at EXEC has expired, which Redis
// 7 counts as a change too.

// queued is a command of a transaction, with copies of its arguments.
type queued struct {
	cmd  *command
	args [][]byte
}

// watchKey names a key of a database.
type watchKey struct {
	db  int
	key string
}

// watched is a key a client watches, and whether it existed at WATCH.
type watched struct {
	watchKey
	live bool
}

// txn is a client's transaction state.
type txn struct {
	multi   bool // between MULTI and EXEC or DISCARD
	failed  bool // a command could not be queued: EXEC aborts
	queue   []queued
	watched []watched
	// dirty is set, by whichever connection wrote, when a watched key
	// changed.
	dirty atomic.Bool
	// execing is set while EXEC runs the queue: the arguments are the
	// queue's copies, not the reader's.
	execing bool
}

// watchers is the server's index of watched keys.
type watchers struct {
	mu sync.Mutex
	m  map[watchKey]map[*client]struct{}
	// n is len(m), read without the lock by every write, so that writes
	// cost nothing while no one watches.
	n atomic.Int64
}

// modified marks dirty the clients that watch key in cl's database, as
// Redis's signalModifiedKey does. Every command that changes a key calls it.
func (s *Server) modified(cl *client, key string) { s.modifiedIn(cl.db, key) }

// modifiedIn is modified for a key of database db.
func (s *Server) modifiedIn(db int, key string) {
	if s.watch.n.Load() == 0 {
		return
	}
	s.watch.mu.Lock()
	for c := range s.watch.m[watchKey{db, key}] {
		c.txn.dirty.Store(true)
	}
	s.watch.mu.Unlock()
}

// flushed marks dirty the clients that watch a key of db that exists; it
// runs before FLUSHDB and FLUSHALL clear the database.
func (s *Server) flushed(db int) {
	if s.watch.n.Load() == 0 {
		return
	}
	s.watch.mu.Lock()
	for wk, cs := range s.watch.m {
		if wk.db != db {
			continue
		}
		if _, ok := s.dbs[db].Deadline(wk.key); ok {
			for c := range cs {
				c.txn.dirty.Store(true)
			}
		}
	}
	s.watch.mu.Unlock()
}

// unwatch forgets every key cl watches.
func (s *Server) unwatch(cl *client) {
	if len(cl.txn.watched) > 0 {
		s.watch.mu.Lock()
		for _, w := range cl.txn.watched {
			cs := s.watch.m[w.watchKey]
			delete(cs, cl)
			if len(cs) == 0 {
				delete(s.watch.m, w.watchKey)
			}
		}
		s.watch.n.Store(int64(len(s.watch.m)))
		s.watch.mu.Unlock()
		cl.txn.watched = nil
	}
	cl.txn.dirty.Store(false)
}

// queue adds a command to cl's transaction.
func (cl *client) queue(cmd *command, args [][]byte) {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	cl.txn.queue = append(cl.txn.queue, queued{cmd, cp})
	cl.w.Simple("QUEUED")
}

// endMulti ends cl's transaction and forgets its watched keys.
func (s *Server) endMulti(cl *client) {
	clear(cl.txn.queue)
	cl.txn.queue = cl.txn.queue[:0]
	cl.txn.multi, cl.txn.failed = false, false
	s.unwatch(cl)
}

func cmdMulti(s *Server, cl *client, args [][]byte) {
	if cl.txn.multi {
		cl.w.Error("ERR MULTI calls can not be nested")
		return
	}
	cl.txn.multi = true
	cl.w.Simple("OK")
}

func cmdDiscard(s *Server, cl *client, args [][]byte) {
	if !cl.txn.multi {
		cl.w.Error("ERR DISCARD without MULTI")
		return
	}
	s.endMulti(cl)
	cl.w.Simple("OK")
}

// cmdExec runs the queued commands, holding the keyspace exclusively
// (dispatch took it), and replies with an array of their replies; or
// EXECABORT when a command could not be queued, or a null array when a
// watched key changed.
func cmdExec(s *Server, cl *client, args [][]byte) {
	if !cl.txn.multi {
		cl.w.Error("ERR EXEC without MULTI")
		return
	}
	defer s.endMulti(cl)
	if cl.txn.failed {
		cl.w.Error("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	if cl.txn.dirty.Load() || s.watchedExpired(cl) {
		cl.w.NullArray()
		return
	}
	cl.txn.multi, cl.txn.execing = false, true
	defer func() { cl.txn.execing = false }()
	cl.w.Array(len(cl.txn.queue))
	for _, q := range cl.txn.queue {
		s.call(q.cmd, cl, q.args)
	}
	s.commands.Add(int64(len(cl.txn.queue)))
}

// watchedExpired reports whether a key that existed when cl watched it no
// longer does: it expired (a write would have marked cl dirty).
func (s *Server) watchedExpired(cl *client) bool {
	for _, w := range cl.txn.watched {
		if _, ok := s.dbs[w.db].Deadline(w.key); w.live && !ok {
			return true
		}
	}
	return false
}

func cmdWatch(s *Server, cl *client, args [][]byte) {
	if cl.txn.multi {
		cl.w.Error("ERR WATCH inside MULTI is not allowed")
		return
	}
	s.watch.mu.Lock()
	if s.watch.m == nil {
		s.watch.m = make(map[watchKey]map[*client]struct{})
	}
next:
	for _, a := range args[1:] {
		wk := watchKey{cl.db, string(a)}
		for _, w := range cl.txn.watched {
			if w.watchKey == wk {
				continue next
			}
		}
		_, live := s.dbs[cl.db].Deadline(wk.key)
		cl.txn.watched = append(cl.txn.watched, watched{wk, live})
		cs := s.watch.m[wk]
		if cs == nil {
			cs = make(map[*client]struct{})
			s.watch.m[wk] = cs
		}
		cs[cl] = struct{}{}
	}
	s.watch.n.Store(int64(len(s.watch.m)))
	s.watch.mu.Unlock()
	cl.w.Simple("OK")
}

func cmdUnwatch(s *Server, cl *client, args [][]byte) {
	s.unwatch(cl)
	cl.w.Simple("OK")
}
