package main

import (
	"math/rand/v2"
	"strings"
)

// The keyspace's generic commands that move, copy or pick keys: RENAME,
// RENAMENX, COPY, MOVE, RANDOMKEY, TOUCH (UNLINK is DEL: values are freed
// at once either way). A key keeps its deadline when it moves or is copied.

const (
	errNoSuchKey = "ERR no such key"
	errSameObj   = "ERR source and destination objects are the same"
	errDBRange   = "ERR DB index is out of range"
)

// renameCommand returns RENAME (nx false) and RENAMENX.
func renameCommand(nx bool) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		db, src, dst := s.db(cl), view(args[1]), view(args[2])
		v, ok := db.Get(src)
		if !ok {
			cl.w.Error(errNoSuchKey)
			return
		}
		if src == dst {
			if nx {
				cl.w.Int(0)
			} else {
				cl.w.Simple("OK")
			}
			return
		}
		if _, exists := db.Deadline(dst); exists && nx {
			cl.w.Int(0)
			return
		}
		d, _ := db.Deadline(src)
		db.Delete(src)
		s.modified(cl, src)
		db.Set(string(args[2]), v, d)
		s.modified(cl, dst)
		s.notify(notifyGeneric, "rename_from", cl.db, src)
		s.notify(notifyGeneric, "rename_to", cl.db, dst)
		if nx {
			cl.w.Int(1)
		} else {
			cl.w.Simple("OK")
		}
	}
}

// cmdCopy answers COPY source destination [DB index] [REPLACE].
func cmdCopy(s *Server, cl *client, args [][]byte) {
	dstDB, replace := cl.db, false
	for j := 3; j < len(args); j++ {
		switch opt := strings.ToLower(string(args[j])); {
		case opt == "replace":
			replace = true
		case opt == "db" && j+1 < len(args):
			j++
			n, ok := parseInt(args[j])
			if !ok || n != int64(int32(n)) {
				cl.w.Error(errNotInteger)
				return
			}
			if n < 0 || n >= numDBs {
				cl.w.Error(errDBRange)
				return
			}
			dstDB = int(n)
		default:
			cl.w.Error(errSyntax)
			return
		}
	}
	src, dst := view(args[1]), view(args[2])
	if dstDB == cl.db && src == dst {
		cl.w.Error(errSameObj)
		return
	}
	from, to := s.db(cl), s.dbs[dstDB]
	v, ok := from.Get(src)
	if !ok {
		cl.w.Int(0)
		return
	}
	d, _ := from.Deadline(src)
	if _, exists := to.Deadline(dst); exists && !replace {
		cl.w.Int(0)
		return
	}
	to.Set(string(args[2]), v, d)
	s.modifiedIn(dstDB, dst)
	s.notify(notifyGeneric, "copy_to", dstDB, dst)
	cl.w.Int(1)
}

// cmdMove answers MOVE key db: the key, with its deadline, moves to
// another database unless it exists there.
func cmdMove(s *Server, cl *client, args [][]byte) {
	n, ok := parseInt(args[2])
	if !ok || n != int64(int32(n)) {
		cl.w.Error(errNotInteger)
		return
	}
	if n < 0 || n >= numDBs {
		cl.w.Error(errDBRange)
		return
	}
	if int(n) == cl.db {
		cl.w.Error(errSameObj)
		return
	}
	from, to, k := s.db(cl), s.dbs[n], view(args[1])
	v, found := from.Get(k)
	if !found {
		cl.w.Int(0)
		return
	}
	if _, exists := to.Deadline(k); exists {
		cl.w.Int(0)
		return
	}
	d, _ := from.Deadline(k)
	from.Delete(k)
	s.modified(cl, k)
	to.Set(string(args[1]), v, d)
	s.modifiedIn(int(n), k)
	s.notify(notifyGeneric, "move_from", cl.db, k)
	s.notify(notifyGeneric, "move_to", int(n), k)
	cl.w.Int(1)
}

// cmdRandomKey answers RANDOMKEY: a live key picked from a random part of
// the keyspace, or null when it is empty.
func cmdRandomKey(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	var keys []string
	cursor, wrapped := rand.Uint64(), 0
	for db.Len() > 0 && len(keys) == 0 && wrapped < 2 {
		cursor = db.Scan(cursor, 16, func(k, _ string) { keys = append(keys, k) })
		if cursor == 0 {
			wrapped++
		}
	}
	if len(keys) == 0 {
		cl.w.Null()
		return
	}
	cl.w.Bulk(keys[rand.IntN(len(keys))])
}

// cmdTouch answers TOUCH key...: how many of the keys exist.
func cmdTouch(s *Server, cl *client, args [][]byte) { cmdExists(s, cl, args) }
