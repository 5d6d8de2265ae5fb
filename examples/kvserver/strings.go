package main

import (
	"math"
	"strings"
	"time"
)

// Time units of the expire arguments, in milliseconds.
const (
	unitSeconds = 1000
	unitMillis  = 1
)

// Flags of SET and GETEX, as in Redis's parseExtendedStringArgumentsOrReply.
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setEX
	setPX
	setEXAT
	setPXAT
	setPersist
)

const setExpireFlags = setEX | setPX | setEXAT | setPXAT

// parseStringOptions parses the options of SET (forGet false) or GETEX
// (forGet true) from args[from:]: the flags and the expire argument.
func parseStringOptions(args [][]byte, from int, forGet bool) (flags int, expire []byte, ok bool) {
	for j := from; j < len(args); j++ {
		opt := strings.ToLower(string(args[j]))
		hasNext := j+1 < len(args)
		var f int
		switch {
		case opt == "nx" && !forGet && flags&setXX == 0:
			f = setNX
		case opt == "xx" && !forGet && flags&setNX == 0:
			f = setXX
		case opt == "get" && !forGet:
			f = setGet
		case opt == "keepttl" && !forGet && flags&(setExpireFlags|setPersist) == 0:
			f = setKeepTTL
		case opt == "persist" && forGet && flags&(setExpireFlags|setKeepTTL) == 0:
			f = setPersist
		case opt == "ex" && flags&(setKeepTTL|setPersist|setExpireFlags&^setEX) == 0 && hasNext:
			f = setEX
		case opt == "px" && flags&(setKeepTTL|setPersist|setExpireFlags&^setPX) == 0 && hasNext:
			f = setPX
		case opt == "exat" && flags&(setKeepTTL|setPersist|setExpireFlags&^setEXAT) == 0 && hasNext:
			f = setEXAT
		case opt == "pxat" && flags&(setKeepTTL|setPersist|setExpireFlags&^setPXAT) == 0 && hasNext:
			f = setPXAT
		default:
			return 0, nil, false
		}
		flags |= f
		if f&setExpireFlags != 0 {
			j++
			expire = args[j]
		}
	}
	return flags, expire, true
}

// expireMillis turns an expire argument into a Unix time in milliseconds
// as Redis's getExpireMillisecondsOrReply does: not positive, or beyond
// what milliseconds hold, is "invalid expire time in '<name>'"; relative
// times are added to now.
func (s *Server) expireMillis(cl *client, name string, arg []byte, unit int64, relative bool) (int64, bool) {
	ms, ok := parseInt(arg)
	if !ok {
		cl.w.Error(errNotInteger)
		return 0, false
	}
	if ms <= 0 || (unit == unitSeconds && ms > math.MaxInt64/1000) {
		cl.w.Error(errExpireTime(name))
		return 0, false
	}
	ms *= unit
	if relative {
		now := s.now().UnixMilli()
		if ms > math.MaxInt64-now {
			cl.w.Error(errExpireTime(name))
			return 0, false
		}
		ms += now
	}
	return ms, true
}

// unitOf returns the unit and relativity of an expire flag.
func unitOf(flags int) (unit int64, relative bool) {
	unit = unitMillis
	if flags&(setEX|setEXAT) != 0 {
		unit = unitSeconds
	}
	return unit, flags&(setEX|setPX) != 0
}

// setLocking: a SET that only stores (with or without a deadline) is one
// operation on the keyspace; NX, XX, GET and KEEPTTL read first.
func setLocking(args [][]byte) locking {
	for _, a := range args[3:] {
		switch strings.ToLower(string(a)) {
		case "nx", "xx", "get", "keepttl":
			return lockExclusive
		}
	}
	return lockShared
}

func cmdSet(s *Server, cl *client, args [][]byte) {
	flags, expire, ok := parseStringOptions(args, 3, false)
	if !ok {
		cl.w.Error(errSyntax)
		return
	}
	var at int64
	if flags&setExpireFlags != 0 {
		unit, relative := unitOf(flags)
		if at, ok = s.expireMillis(cl, "set", expire, unit, relative); !ok {
			return
		}
	}
	db := s.db(cl)
	if flags&(setNX|setXX|setGet|setKeepTTL) != 0 {
		old, found := db.Get(view(args[1]))
		if flags&setGet != 0 {
			if found {
				cl.w.Bulk(old)
			} else {
				cl.w.Null()
			}
		}
		if (flags&setNX != 0 && found) || (flags&setXX != 0 && !found) {
			if flags&setGet == 0 {
				cl.w.Null()
			}
			return
		}
		if flags&setKeepTTL != 0 {
			if d, ok := db.Deadline(view(args[1])); ok && !d.IsZero() {
				key, val := own(cl, args[1], 2, args[2])
				db.Set(key, val, d)
				s.modified(cl, key)
				s.notify(notifyString, "set", cl.db, key)
				if flags&setGet == 0 {
					cl.w.Simple("OK")
				}
				return
			}
		}
	}
	key, val := own(cl, args[1], 2, args[2])
	s.store(cl, key, val, at)
	s.modified(cl, key)
	if flags&setGet == 0 {
		cl.w.Simple("OK")
	}
}

// store sets key to val with the deadline at (Unix ms, 0 for none). A
// deadline already past leaves the key absent and counts as an expired
// key, as in Redis, where the key is stored and then found expired.
func (s *Server) store(cl *client, key, val string, at int64) {
	db := s.db(cl)
	if at == 0 {
		db.Set(key, val, time.Time{})
		s.notify(notifyString, "set", cl.db, key)
		return
	}
	past := at <= s.now().UnixMilli()
	deadline := deadlineOf(at)
	if past {
		deadline = time.Unix(0, 0) // past (and not the zero Time, "none"): absent at once
	}
	db.Set(key, val, deadline)
	s.notify(notifyString, "set", cl.db, key)
	s.notify(notifyGeneric, "expire", cl.db, key)
	if past {
		s.expiredOnSet.Add(1)
		s.notify(notifyExpired, "expired", cl.db, key)
	}
}

// setexCommand returns SETEX (seconds) and PSETEX (milliseconds).
func setexCommand(name string, unit int64) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		at, ok := s.expireMillis(cl, name, args[2], unit, true)
		if !ok {
			return
		}
		key, val := own(cl, args[1], 3, args[3])
		s.store(cl, key, val, at)
		s.modified(cl, key)
		cl.w.Simple("OK")
	}
}

func getexLocking(args [][]byte) locking {
	if len(args) == 2 {
		return lockShared
	}
	return lockExclusive
}

// cmdGetEx answers GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: the
// value, and the deadline changed as asked. A deadline in the past deletes
// the key after its value is returned.
func cmdGetEx(s *Server, cl *client, args [][]byte) {
	flags, expire, ok := parseStringOptions(args, 2, true)
	if !ok {
		cl.w.Error(errSyntax)
		return
	}
	// As Redis: the key first (a missing key is a null reply whatever
	// the time), then the time.
	db, k := s.db(cl), view(args[1])
	v, found := db.Get(k)
	if !found {
		cl.w.Null()
		return
	}
	var at int64
	if flags&setExpireFlags != 0 {
		unit, relative := unitOf(flags)
		if at, ok = s.expireMillis(cl, "getex", expire, unit, relative); !ok {
			return
		}
	}
	cl.w.Bulk(v)
	switch {
	case at != 0:
		now := s.now().UnixMilli()
		expireAt(db, k, at, now)
		s.modified(cl, k)
		if at <= now {
			s.notify(notifyGeneric, "del", cl.db, k)
		} else {
			s.notify(notifyGeneric, "expire", cl.db, k)
		}
	case flags&setPersist != 0:
		if persist(db, k) {
			s.modified(cl, k)
			s.notify(notifyGeneric, "persist", cl.db, k)
		}
	}
}

// cmdSetNX answers SETNX key value: 1 if it stored the value, 0 if the key
// existed.
func cmdSetNX(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	if _, ok := db.Deadline(view(args[1])); ok {
		cl.w.Int(0)
		return
	}
	key, val := own(cl, args[1], 2, args[2])
	db.Set(key, val, time.Time{})
	s.modified(cl, key)
	s.notify(notifyString, "set", cl.db, key)
	cl.w.Int(1)
}

// cmdGetSet answers GETSET key value: the old value (or null); the new one
// has no deadline.
func cmdGetSet(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	if old, ok := db.Get(view(args[1])); ok {
		cl.w.Bulk(old)
	} else {
		cl.w.Null()
	}
	key, val := own(cl, args[1], 2, args[2])
	db.Set(key, val, time.Time{})
	s.modified(cl, key)
	s.notify(notifyString, "set", cl.db, key)
}

// cmdMSetNX answers MSETNX key value ...: all the keys are set, and 1
// returned, only if none exists.
func cmdMSetNX(s *Server, cl *client, args [][]byte) {
	if len(args)%2 != 1 {
		cl.w.Error(errArity("msetnx"))
		return
	}
	db := s.db(cl)
	for i := 1; i < len(args); i += 2 {
		if _, ok := db.Deadline(view(args[i])); ok {
			cl.w.Int(0)
			return
		}
	}
	for i := 1; i < len(args); i += 2 {
		k, v := own(cl, args[i], i+1, args[i+1])
		db.Set(k, v, time.Time{})
		s.modified(cl, k)
		s.notify(notifyString, "set", cl.db, k)
	}
	cl.w.Int(1)
}
