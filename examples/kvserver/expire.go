package main

import (
	"math"
	"strings"
	"time"
)

// EXPIRE flags.
const (
	expireNX = 1 << iota
	expireXX
	expireGT
	expireLT
)

// expireLocking: EXPIRE without a condition is one operation on the
// keyspace; NX, XX, GT and LT read the deadline first.
func expireLocking(args [][]byte) locking {
	if len(args) == 3 {
		return lockShared
	}
	return lockExclusive
}

// expireCommand returns EXPIRE (unit s, relative), PEXPIRE, EXPIREAT and
// PEXPIREAT. As in Redis, a deadline that is not in the future deletes the
// key, and the reply says whether the key existed and the condition held.
func expireCommand(unit int64, relative bool) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		name := strings.ToLower(string(args[0]))
		// Options first, then the time: Redis reports a bad option before
		// a bad time.
		flags := 0
		for _, a := range args[3:] {
			switch strings.ToLower(string(a)) {
			case "nx":
				flags |= expireNX
			case "xx":
				flags |= expireXX
			case "gt":
				flags |= expireGT
			case "lt":
				flags |= expireLT
			default:
				cl.w.Error("ERR Unsupported option " + string(a))
				return
			}
		}
		if flags&expireNX != 0 && flags&(expireXX|expireGT|expireLT) != 0 {
			cl.w.Error("ERR NX and XX, GT or LT options at the same time are not compatible")
			return
		}
		if flags&expireGT != 0 && flags&expireLT != 0 {
			cl.w.Error("ERR GT and LT options at the same time are not compatible")
			return
		}
		when, ok := parseInt(args[2])
		if !ok {
			cl.w.Error(errNotInteger)
			return
		}
		if unit == unitSeconds {
			if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
				cl.w.Error(errExpireTime(name))
				return
			}
			when *= 1000
		}
		if relative {
			now := s.now().UnixMilli()
			if when > math.MaxInt64-now {
				cl.w.Error(errExpireTime(name))
				return
			}
			when += now
		}
		db, key := s.db(cl), view(args[1])
		if flags != 0 {
			cur, found := db.Deadline(key)
			if !found {
				cl.w.Int(0)
				return
			}
			curMS := int64(-1)
			if !cur.IsZero() {
				curMS = expireMillis(cur)
			}
			if (flags&expireNX != 0 && curMS != -1) ||
				(flags&expireXX != 0 && curMS == -1) ||
				(flags&expireGT != 0 && (curMS == -1 || when <= curMS)) ||
				(flags&expireLT != 0 && curMS != -1 && when >= curMS) {
				cl.w.Int(0)
				return
			}
		}
		now := s.now().UnixMilli()
		if expireAt(db, key, when, now) {
			s.modified(cl, key)
			if when <= now {
				s.notify(notifyGeneric, "del", cl.db, key)
			} else {
				s.notify(notifyGeneric, "expire", cl.db, key)
			}
			cl.w.Int(1)
		} else {
			cl.w.Int(0)
		}
	}
}

// ttlCommand returns TTL (unit s) and PTTL: -2 for a missing key, -1 for a
// key without a deadline, else the time left, rounded as Redis rounds it.
func ttlCommand(unit int64) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		at, ok := s.db(cl).Deadline(view(args[1]))
		switch {
		case !ok:
			cl.w.Int(-2)
		case at.IsZero():
			cl.w.Int(-1)
		default:
			ms := max(expireMillis(at)-s.now().UnixMilli(), 0)
			if unit == unitSeconds {
				ms = (ms + 500) / 1000
			}
			cl.w.Int(ms)
		}
	}
}

// expireTimeCommand returns EXPIRETIME and PEXPIRETIME: the deadline as a
// Unix time, -1 without one, -2 for a missing key.
func expireTimeCommand(unit int64) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		at, ok := s.db(cl).Deadline(view(args[1]))
		switch {
		case !ok:
			cl.w.Int(-2)
		case at.IsZero():
			cl.w.Int(-1)
		case unit == unitSeconds:
			cl.w.Int((expireMillis(at) + 500) / 1000)
		default:
			cl.w.Int(expireMillis(at))
		}
	}
}

// deadlineOf returns the keyspace deadline of a key whose Redis expire time
// is at (Unix ms). Redis expires a key once its clock, in whole
// milliseconds, is past at: from the first instant of the next millisecond,
// which is the deadline (a key is absent from its deadline on).
func deadlineOf(at int64) time.Time { return time.UnixMilli(at).Add(time.Millisecond) }

// expireMillis returns the Redis expire time (Unix ms) of the keyspace
// deadline d, the inverse of deadlineOf.
func expireMillis(d time.Time) int64 { return d.Add(-time.Millisecond).UnixMilli() }

// expireAt gives key the expire time at (Unix ms) and reports whether the
// key exists; an expire time not after now (Unix ms) deletes the key, as
// in Redis.
func expireAt(db keyspace, key string, at, now int64) bool {
	if at <= now {
		_, ok := db.Delete(key)
		return ok
	}
	_, ok := db.Expire(key, deadlineOf(at))
	return ok
}

// persist removes key's deadline and reports whether it had one (PERSIST).
func persist(db keyspace, key string) bool {
	old, ok := db.Expire(key, time.Time{})
	return ok && !old.IsZero()
}
