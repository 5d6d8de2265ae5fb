package main

import (
	"math"
	"strings"
	"time"
)

// errWrongType is Redis's answer to a command for another data type.
const errWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

// SORT sorts lists, sets and sorted sets, of which kvserver has none: a
// string key is the wrong type and a missing key an empty collection. The
// options are parsed first, as Redis 7.0 does, so that a bad one gets
// Redis's error whatever the key.

// sortCommand returns SORT (readonly false) and SORT_RO, which has no STORE.
func sortCommand(readonly bool) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		var store []byte
		for j := 2; j < len(args); j++ {
			left := len(args) - j - 1
			switch opt := strings.ToLower(string(args[j])); {
			case opt == "asc", opt == "desc", opt == "alpha":
			case opt == "limit" && left >= 2:
				if _, ok := parseInt(args[j+1]); !ok {
					cl.w.Error(errNotInteger)
					return
				}
				if _, ok := parseInt(args[j+2]); !ok {
					cl.w.Error(errNotInteger)
					return
				}
				j += 2
			case opt == "store" && !readonly && left >= 1:
				store = args[j+1]
				j++
			case (opt == "by" || opt == "get") && left >= 1:
				j++
			default:
				cl.w.Error(errSyntax)
				return
			}
		}
		db := s.db(cl)
		if _, ok := db.Deadline(view(args[1])); ok {
			cl.w.Error(errWrongType)
			return
		}
		if store == nil {
			cl.w.Array(0)
			return
		}
		// An empty result deletes the destination, as in Redis.
		if v, ok := db.Delete(view(store)); ok {
			s.freed(len(v))
			s.modified(cl, view(store))
			s.notify(notifyGeneric, "del", cl.db, view(store))
		}
		cl.w.Int(0)
	}
}

// cmdWait answers WAIT numreplicas timeout as a Redis master without
// replicas: 0 at once when no replica is asked for (or inside MULTI), else
// 0 when the timeout (in milliseconds, 0 for none) ends.
func cmdWait(s *Server, cl *client, args [][]byte) {
	n, ok := parseInt(args[1])
	if !ok {
		cl.w.Error(errNotInteger)
		return
	}
	ms, ok := parseInt(args[2])
	if !ok {
		cl.w.Error("ERR timeout is not an integer or out of range")
		return
	}
	if ms < 0 {
		cl.w.Error("ERR timeout is negative")
		return
	}
	if n > 0 && !cl.txn.execing {
		var timeout <-chan time.Time
		if ms > 0 {
			t := time.NewTimer(time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond)
			defer t.Stop()
			timeout = t.C
		}
		// A client that hangs up (or is killed) ends its wait: its
		// goroutine and socket go at once, not at shutdown.
		var gone <-chan struct{}
		if watch := hangupWatcher(cl.conn); watch != nil {
			stop, done, exited := make(chan struct{}), make(chan struct{}), make(chan struct{})
			gone = done
			go func() {
				defer close(exited)
				if watch(stop) {
					close(done)
				}
			}()
			defer func() {
				close(stop)
				// Wake the watcher's wait in the poller, then let the
				// connection's reads wait again without a deadline.
				_ = cl.conn.SetReadDeadline(time.Now())
				<-exited
				_ = cl.conn.SetReadDeadline(time.Time{})
			}()
		}
		select {
		case <-timeout:
		case <-s.stop:
		case <-gone:
			cl.quit = true
			return
		}
	}
	cl.w.Int(0)
}
