package main

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// The cases below are Redis 7.0's tests/unit/expire.tcl and the cases of
// tests/unit/type/string.tcl that exercise SET's options ("Extended SET"),
// GETEX, GETDEL, MGET and MSET, each named as the original and doing what
// it does, in the original order (some cases use the keys of the one
// before). They run against kvserver (TestRedisSuite) and against a real
// redis-server (TestRedisSuiteOnRedis), as Redis's harness runs them:
// SELECT 9, FLUSHALL, then one case after another on one connection.
//
// Left out, because they need more than strings and expiry: "EXPIRE -
// write on expire should work" and "Extended SET GET with incorrect type
// should result in wrong type error" (lists), the cases that reload the
// AOF ("... after loadaof") and those that read the replication stream
// ("... propagation to replicas", "GETEX propagate as to replica ...",
// "Redis should not propagate the read command on lazy expire", "SCAN:
// Lazy-expire should not be wrapped in MULTI/EXEC", "RANDOMKEY: ...").

// suite is one connection's session of the cases.
type suite struct {
	t   *testing.T
	c   *redis.Client
	ctx context.Context
}

// r runs a command that must succeed and returns its reply, nil for a
// null reply (Tcl's {}).
func (s *suite) r(args ...any) any {
	s.t.Helper()
	v, err := s.c.Do(s.ctx, args...).Result()
	if err == redis.Nil {
		return nil
	}
	require.NoError(s.t, err, "%q", args)
	return v
}

// int runs a command whose reply is an integer.
func (s *suite) int(args ...any) int64 {
	s.t.Helper()
	v, ok := s.r(args...).(int64)
	require.True(s.t, ok, "%q: not an integer", args)
	return v
}

// err runs a command that must fail and returns the error (Tcl's catch).
func (s *suite) err(args ...any) string {
	s.t.Helper()
	err := s.c.Do(s.ctx, args...).Err()
	require.Error(s.t, err, "%q", args)
	require.NotEqual(s.t, redis.Nil, err, "%q", args)
	return err.Error()
}

func (s *suite) after(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

func (s *suite) assertRange(v, lo, hi int64) {
	s.t.Helper()
	assert.True(s.t, lo <= v && v <= hi, "%d not in [%d, %d]", v, lo, hi)
}

func clockSeconds() int64      { return time.Now().Unix() }
func clockMilliseconds() int64 { return time.Now().UnixMilli() }

type suiteCase struct {
	name string
	run  func(r *suite)
}

var expireSuite = []suiteCase{
	{"EXPIRE - set timeouts multiple times", func(r *suite) {
		r.r("set", "x", "foobar")
		v1 := r.int("expire", "x", 5)
		v2 := r.int("ttl", "x")
		v3 := r.int("expire", "x", 10)
		v4 := r.int("ttl", "x")
		r.r("expire", "x", 2)
		assert.Equal(r.t, int64(1), v1)
		assert.Contains(r.t, []int64{4, 5}, v2)
		assert.Equal(r.t, int64(1), v3)
		assert.Equal(r.t, int64(10), v4)
	}},
	{"EXPIRE - It should be still possible to read 'x'", func(r *suite) {
		assert.Equal(r.t, "foobar", r.r("get", "x"))
	}},
	{"EXPIRE - After 2.1 seconds the key should no longer be here", func(r *suite) {
		r.after(2100)
		assert.Nil(r.t, r.r("get", "x"))
		assert.Equal(r.t, int64(0), r.int("exists", "x"))
	}},
	{"EXPIREAT - Check for EXPIRE alike behavior", func(r *suite) {
		r.r("del", "x")
		r.r("set", "x", "foo")
		r.r("expireat", "x", clockSeconds()+15)
		assert.Contains(r.t, []int64{13, 14, 15}, r.int("ttl", "x"))
	}},
	{"SETEX - Set + Expire combo operation. Check for TTL", func(r *suite) {
		r.r("setex", "x", 12, "test")
		assert.Contains(r.t, []int64{10, 11, 12}, r.int("ttl", "x"))
	}},
	{"SETEX - Check value", func(r *suite) {
		assert.Equal(r.t, "test", r.r("get", "x"))
	}},
	{"SETEX - Overwrite old key", func(r *suite) {
		r.r("setex", "y", 1, "foo")
		assert.Equal(r.t, "foo", r.r("get", "y"))
	}},
	{"SETEX - Wait for the key to expire", func(r *suite) {
		r.after(1100)
		assert.Nil(r.t, r.r("get", "y"))
	}},
	{"SETEX - Wrong time parameter", func(r *suite) {
		assert.Contains(r.t, r.err("setex", "z", -10, "foo"), "invalid expire")
	}},
	{"PERSIST can undo an EXPIRE", func(r *suite) {
		r.r("set", "x", "foo")
		r.r("expire", "x", 50)
		assert.Equal(r.t, []any{int64(50), int64(1), int64(-1), "foo"},
			[]any{r.int("ttl", "x"), r.int("persist", "x"), r.int("ttl", "x"), r.r("get", "x")})
	}},
	{"PERSIST returns 0 against non existing or non volatile keys", func(r *suite) {
		r.r("set", "x", "foo")
		assert.Equal(r.t, int64(0), r.int("persist", "foo"))
		assert.Equal(r.t, int64(0), r.int("persist", "nokeyatall"))
	}},
	{"EXPIRE precision is now the millisecond", func(r *suite) {
		var a, b any
		for range 3 {
			r.r("del", "x")
			r.r("setex", "x", 1, "somevalue")
			r.after(900)
			a = r.r("get", "x")
			r.after(1100)
			b = r.r("get", "x")
			if a == "somevalue" && b == nil {
				break
			}
		}
		assert.Equal(r.t, "somevalue", a)
		assert.Nil(r.t, b)
	}},
	{"PSETEX can set sub-second expires", func(r *suite) {
		var a, b any
		for range 50 {
			r.r("del", "x")
			r.r("psetex", "x", 100, "somevalue")
			a = r.r("get", "x")
			r.after(101)
			b = r.r("get", "x")
			if a == "somevalue" && b == nil {
				break
			}
		}
		assert.Equal(r.t, []any{"somevalue", nil}, []any{a, b})
	}},
	{"PEXPIRE can set sub-second expires", func(r *suite) {
		var c, d any
		for range 50 {
			r.r("set", "x", "somevalue")
			r.r("pexpire", "x", 100)
			c = r.r("get", "x")
			r.after(101)
			d = r.r("get", "x")
			if c == "somevalue" && d == nil {
				break
			}
		}
		assert.Equal(r.t, []any{"somevalue", nil}, []any{c, d})
	}},
	{"PEXPIREAT can set sub-second expires", func(r *suite) {
		var e, f any
		for range 50 {
			r.r("set", "x", "somevalue")
			now := r.r("time").([]any)
			sec, _ := strconv.ParseInt(now[0].(string), 10, 64)
			usec, _ := strconv.ParseInt(now[1].(string), 10, 64)
			r.r("pexpireat", "x", sec*1000+usec/1000+200)
			e = r.r("get", "x")
			r.after(201)
			f = r.r("get", "x")
			if e == "somevalue" && f == nil {
				break
			}
		}
		assert.Equal(r.t, []any{"somevalue", nil}, []any{e, f})
	}},
	{"TTL returns time to live in seconds", func(r *suite) {
		r.r("del", "x")
		r.r("setex", "x", 10, "somevalue")
		ttl := r.int("ttl", "x")
		assert.True(r.t, ttl > 8 && ttl <= 10, "%d", ttl)
	}},
	{"PTTL returns time to live in milliseconds", func(r *suite) {
		r.r("del", "x")
		r.r("setex", "x", 1, "somevalue")
		ttl := r.int("pttl", "x")
		assert.True(r.t, ttl > 900 && ttl <= 1000, "%d", ttl)
	}},
	{"TTL / PTTL / EXPIRETIME / PEXPIRETIME return -1 if key has no expire", func(r *suite) {
		r.r("del", "x")
		r.r("set", "x", "hello")
		assert.Equal(r.t, []int64{-1, -1, -1, -1},
			[]int64{r.int("ttl", "x"), r.int("pttl", "x"), r.int("expiretime", "x"), r.int("pexpiretime", "x")})
	}},
	{"TTL / PTTL / EXPIRETIME / PEXPIRETIME return -2 if key does not exit", func(r *suite) {
		r.r("del", "x")
		assert.Equal(r.t, []int64{-2, -2, -2, -2},
			[]int64{r.int("ttl", "x"), r.int("pttl", "x"), r.int("expiretime", "x"), r.int("pexpiretime", "x")})
	}},
	{"EXPIRETIME returns absolute expiration time in seconds", func(r *suite) {
		r.r("del", "x")
		abs := clockSeconds() + 100
		r.r("set", "x", "somevalue", "exat", abs)
		assert.Equal(r.t, abs, r.int("expiretime", "x"))
	}},
	{"PEXPIRETIME returns absolute expiration time in milliseconds", func(r *suite) {
		r.r("del", "x")
		abs := clockMilliseconds() + 100000
		r.r("set", "x", "somevalue", "pxat", abs)
		assert.Equal(r.t, abs, r.int("pexpiretime", "x"))
	}},
	{"Redis should actively expire keys incrementally", func(r *suite) {
		r.r("flushdb")
		r.r("psetex", "key1", 500, "a")
		r.r("psetex", "key2", 500, "a")
		r.r("psetex", "key3", 500, "a")
		size1 := r.int("dbsize")
		r.after(1000)
		size2 := r.int("dbsize")
		assert.Equal(r.t, []int64{3, 0}, []int64{size1, size2})
	}},
	{"Redis should lazy expire keys", func(r *suite) {
		r.r("flushdb")
		r.r("debug", "set-active-expire", 0)
		r.r("psetex", "key1", 500, "a")
		r.r("psetex", "key2", 500, "a")
		r.r("psetex", "key3", 500, "a")
		size1 := r.int("dbsize")
		r.after(1000)
		size2 := r.int("dbsize")
		r.r("mget", "key1", "key2", "key3")
		size3 := r.int("dbsize")
		r.r("debug", "set-active-expire", 1)
		assert.Equal(r.t, []int64{3, 3, 0}, []int64{size1, size2, size3})
	}},
	{"EXPIRE should not resurrect keys (issue #1026)", func(r *suite) {
		r.r("debug", "set-active-expire", 0)
		r.r("set", "foo", "bar")
		r.r("pexpire", "foo", 500)
		r.after(1000)
		r.r("expire", "foo", 10)
		r.r("debug", "set-active-expire", 1)
		assert.Equal(r.t, int64(0), r.int("exists", "foo"))
	}},
	{"5 keys in, 5 keys out", func(r *suite) {
		r.r("flushdb")
		r.r("set", "a", "c")
		r.r("expire", "a", 5)
		r.r("set", "t", "c")
		r.r("set", "e", "c")
		r.r("set", "s", "c")
		r.r("set", "foo", "b")
		var keys []string
		for _, k := range r.r("keys", "*").([]any) {
			keys = append(keys, k.(string))
		}
		slices.Sort(keys)
		assert.Equal(r.t, []string{"a", "e", "foo", "s", "t"}, keys)
		r.r("del", "a")
	}},
	{"EXPIRE with empty string as TTL should report an error", func(r *suite) {
		r.r("set", "foo", "bar")
		assert.Contains(r.t, r.err("expire", "foo", ""), "not an integer")
	}},
	{"SET with EX with big integer should report an error", func(r *suite) {
		assert.Equal(r.t, "ERR invalid expire time in 'set' command", r.err("set", "foo", "bar", "EX", "10000000000000000"))
	}},
	{"SET with EX with smallest integer should report an error", func(r *suite) {
		assert.Equal(r.t, "ERR invalid expire time in 'set' command", r.err("SET", "foo", "bar", "EX", "-9999999999999999"))
	}},
	{"GETEX with big integer should report an error", func(r *suite) {
		r.r("set", "foo", "bar")
		assert.Equal(r.t, "ERR invalid expire time in 'getex' command", r.err("GETEX", "foo", "EX", "10000000000000000"))
	}},
	{"GETEX with smallest integer should report an error", func(r *suite) {
		r.r("set", "foo", "bar")
		assert.Equal(r.t, "ERR invalid expire time in 'getex' command", r.err("GETEX", "foo", "EX", "-9999999999999999"))
	}},
	{"EXPIRE with big integer overflows when converted to milliseconds", func(r *suite) {
		r.r("set", "foo", "bar")
		for _, n := range []string{"9223370399119966", "9223372036854776", "10000000000000000", "18446744073709561"} {
			assert.Equal(r.t, "ERR invalid expire time in 'expire' command", r.err("EXPIRE", "foo", n), n)
		}
		assert.Equal(r.t, int64(-1), r.int("ttl", "foo"))
	}},
	{"PEXPIRE with big integer overflow when basetime is added", func(r *suite) {
		r.r("set", "foo", "bar")
		assert.Equal(r.t, "ERR invalid expire time in 'pexpire' command", r.err("PEXPIRE", "foo", "9223372036854770000"))
	}},
	{"EXPIRE with big negative integer", func(r *suite) {
		r.r("set", "foo", "bar")
		for _, n := range []string{"-9223372036854776", "-9999999999999999"} {
			assert.Equal(r.t, "ERR invalid expire time in 'expire' command", r.err("EXPIRE", "foo", n), n)
		}
		assert.Equal(r.t, int64(-1), r.int("ttl", "foo"))
	}},
	{"PEXPIREAT with big integer works", func(r *suite) {
		r.r("set", "foo", "bar")
		assert.Equal(r.t, int64(1), r.int("PEXPIREAT", "foo", "9223372036854770000"))
	}},
	{"PEXPIREAT with big negative integer works", func(r *suite) {
		r.r("set", "foo", "bar")
		r.r("PEXPIREAT", "foo", "-9223372036854770000")
		assert.Equal(r.t, int64(-2), r.int("ttl", "foo"))
	}},
	{"SET command will remove expire", func(r *suite) {
		r.r("set", "foo", "bar", "EX", 100)
		r.r("set", "foo", "bar")
		assert.Equal(r.t, int64(-1), r.int("ttl", "foo"))
	}},
	{"SET - use KEEPTTL option, TTL should not be removed", func(r *suite) {
		r.r("set", "foo", "bar", "EX", 100)
		r.r("set", "foo", "bar", "KEEPTTL")
		ttl := r.int("ttl", "foo")
		assert.True(r.t, ttl <= 100 && ttl > 90, "%d", ttl)
	}},
	{"GETEX use of PERSIST option should remove TTL", func(r *suite) {
		r.r("set", "foo", "bar", "EX", 100)
		r.r("getex", "foo", "PERSIST")
		assert.Equal(r.t, int64(-1), r.int("ttl", "foo"))
	}},
	{"EXPIRE with NX option on a key with ttl", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 100)
		assert.Equal(r.t, int64(0), r.int("EXPIRE", "foo", 200, "NX"))
		r.assertRange(r.int("TTL", "foo"), 50, 100)
	}},
	{"EXPIRE with NX option on a key without ttl", func(r *suite) {
		r.r("SET", "foo", "bar")
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", 200, "NX"))
		r.assertRange(r.int("TTL", "foo"), 100, 200)
	}},
	{"EXPIRE with XX option on a key with ttl", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 100)
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", 200, "XX"))
		r.assertRange(r.int("TTL", "foo"), 100, 200)
	}},
	{"EXPIRE with XX option on a key without ttl", func(r *suite) {
		r.r("SET", "foo", "bar")
		assert.Equal(r.t, int64(0), r.int("EXPIRE", "foo", 200, "XX"))
		assert.Equal(r.t, int64(-1), r.int("TTL", "foo"))
	}},
	{"EXPIRE with GT option on a key with lower ttl", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 100)
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", 200, "GT"))
		r.assertRange(r.int("TTL", "foo"), 100, 200)
	}},
	{"EXPIRE with GT option on a key with higher ttl", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 200)
		assert.Equal(r.t, int64(0), r.int("EXPIRE", "foo", 100, "GT"))
		r.assertRange(r.int("TTL", "foo"), 100, 200)
	}},
	{"EXPIRE with GT option on a key without ttl", func(r *suite) {
		r.r("SET", "foo", "bar")
		assert.Equal(r.t, int64(0), r.int("EXPIRE", "foo", 200, "GT"))
		assert.Equal(r.t, int64(-1), r.int("TTL", "foo"))
	}},
	{"EXPIRE with LT option on a key with higher ttl", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 100)
		assert.Equal(r.t, int64(0), r.int("EXPIRE", "foo", 200, "LT"))
		r.assertRange(r.int("TTL", "foo"), 50, 100)
	}},
	{"EXPIRE with LT option on a key with lower ttl", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 200)
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", 100, "LT"))
		r.assertRange(r.int("TTL", "foo"), 50, 100)
	}},
	{"EXPIRE with LT option on a key without ttl", func(r *suite) {
		r.r("SET", "foo", "bar")
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", 100, "LT"))
		r.assertRange(r.int("TTL", "foo"), 50, 100)
	}},
	{"EXPIRE with LT and XX option on a key with ttl", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 200)
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", 100, "LT", "XX"))
		r.assertRange(r.int("TTL", "foo"), 50, 100)
	}},
	{"EXPIRE with LT and XX option on a key without ttl", func(r *suite) {
		r.r("SET", "foo", "bar")
		assert.Equal(r.t, int64(0), r.int("EXPIRE", "foo", 200, "LT", "XX"))
		assert.Equal(r.t, int64(-1), r.int("TTL", "foo"))
	}},
	{"EXPIRE with conflicting options: LT GT", func(r *suite) {
		assert.Equal(r.t, "ERR GT and LT options at the same time are not compatible", r.err("EXPIRE", "foo", 200, "LT", "GT"))
	}},
	{"EXPIRE with conflicting options: NX GT", func(r *suite) {
		assert.Equal(r.t, "ERR NX and XX, GT or LT options at the same time are not compatible", r.err("EXPIRE", "foo", 200, "NX", "GT"))
	}},
	{"EXPIRE with conflicting options: NX LT", func(r *suite) {
		assert.Equal(r.t, "ERR NX and XX, GT or LT options at the same time are not compatible", r.err("EXPIRE", "foo", 200, "NX", "LT"))
	}},
	{"EXPIRE with conflicting options: NX XX", func(r *suite) {
		assert.Equal(r.t, "ERR NX and XX, GT or LT options at the same time are not compatible", r.err("EXPIRE", "foo", 200, "NX", "XX"))
	}},
	{"EXPIRE with unsupported options", func(r *suite) {
		assert.Equal(r.t, "ERR Unsupported option AB", r.err("EXPIRE", "foo", 200, "AB"))
	}},
	{"EXPIRE with unsupported options (XX AB)", func(r *suite) {
		assert.Equal(r.t, "ERR Unsupported option AB", r.err("EXPIRE", "foo", 200, "XX", "AB"))
	}},
	{"EXPIRE with negative expiry", func(r *suite) {
		r.r("SET", "foo", "bar", "EX", 100)
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", -10, "LT"))
		assert.Equal(r.t, int64(-2), r.int("TTL", "foo"))
	}},
	{"EXPIRE with negative expiry on a non-valitale key", func(r *suite) {
		r.r("SET", "foo", "bar")
		assert.Equal(r.t, int64(1), r.int("EXPIRE", "foo", -10, "LT"))
		assert.Equal(r.t, int64(-2), r.int("TTL", "foo"))
	}},
	{"EXPIRE with non-existed key", func(r *suite) {
		for _, opt := range []string{"NX", "XX", "GT", "LT"} {
			assert.Equal(r.t, int64(0), r.int("EXPIRE", "none", 100, opt), opt)
		}
	}},
}

// stringSuite is the string-only part of tests/unit/type/string.tcl that
// exercises SET's options, GETEX, GETDEL, MGET and MSET.
var stringSuite = []suiteCase{
	{"GETEX EX option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		r.r("getex", "foo", "ex", 10)
		r.assertRange(r.int("ttl", "foo"), 5, 10)
	}},
	{"GETEX PX option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		r.r("getex", "foo", "px", 10000)
		r.assertRange(r.int("pttl", "foo"), 5000, 10000)
	}},
	{"GETEX EXAT option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		r.r("getex", "foo", "exat", clockSeconds()+10)
		r.assertRange(r.int("ttl", "foo"), 5, 10)
	}},
	{"GETEX PXAT option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		r.r("getex", "foo", "pxat", clockMilliseconds()+10000)
		r.assertRange(r.int("pttl", "foo"), 5000, 10000)
	}},
	{"GETEX PERSIST option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar", "ex", 10)
		r.assertRange(r.int("ttl", "foo"), 5, 10)
		r.r("getex", "foo", "persist")
		assert.Equal(r.t, int64(-1), r.int("ttl", "foo"))
	}},
	{"GETEX no option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		r.r("getex", "foo")
		assert.Equal(r.t, "bar", r.r("getex", "foo"))
	}},
	{"GETEX syntax errors", func(r *suite) {
		assert.Contains(r.t, r.err("getex", "foo", "non-existent-option"), "syntax")
	}},
	{"GETEX and GET expired key or not exist", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar", "px", 1)
		r.after(2)
		assert.Nil(r.t, r.r("getex", "foo"))
		assert.Nil(r.t, r.r("get", "foo"))
	}},
	{"GETEX no arguments", func(r *suite) {
		assert.Contains(r.t, r.err("getex"), "wrong number of arguments for 'getex' command")
	}},
	{"GETDEL command", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		assert.Equal(r.t, "bar", r.r("getdel", "foo"))
		assert.Nil(r.t, r.r("getdel", "foo"))
	}},
	{"MGET", func(r *suite) {
		r.r("flushdb")
		r.r("set", "foo{t}", "BAR")
		r.r("set", "bar{t}", "FOO")
		assert.Equal(r.t, []any{"BAR", "FOO"}, r.r("mget", "foo{t}", "bar{t}"))
	}},
	{"MGET against non existing key", func(r *suite) {
		assert.Equal(r.t, []any{"BAR", nil, "FOO"}, r.r("mget", "foo{t}", "baazz{t}", "bar{t}"))
	}},
	{"MSET base case", func(r *suite) {
		r.r("mset", "x{t}", 10, "y{t}", "foo bar", "z{t}", "x x x x x x x\n\n\r\n")
		assert.Equal(r.t, []any{"10", "foo bar", "x x x x x x x\n\n\r\n"}, r.r("mget", "x{t}", "y{t}", "z{t}"))
	}},
	{"MSET/MSETNX wrong number of args (MSET)", func(r *suite) {
		assert.Contains(r.t, r.err("mset", "x{t}", 10, "y{t}", "foo bar", "z{t}"), "wrong number of arguments for 'mset' command")
	}},
	{"MSET with already existing - same key twice", func(r *suite) {
		r.r("set", "x{t}", "x")
		assert.Equal(r.t, "OK", r.r("mset", "x{t}", "xxx", "x{t}", "yyy"))
		assert.Equal(r.t, "yyy", r.r("get", "x{t}"))
	}},
	{"Extended SET can detect syntax errors", func(r *suite) {
		assert.Contains(r.t, r.err("set", "foo", "bar", "non-existing-option"), "syntax")
	}},
	{"Extended SET NX option", func(r *suite) {
		r.r("del", "foo")
		v1 := r.r("set", "foo", 1, "nx")
		v2 := r.r("set", "foo", 2, "nx")
		assert.Equal(r.t, []any{"OK", nil, "1"}, []any{v1, v2, r.r("get", "foo")})
	}},
	{"Extended SET XX option", func(r *suite) {
		r.r("del", "foo")
		v1 := r.r("set", "foo", 1, "xx")
		r.r("set", "foo", "bar")
		v2 := r.r("set", "foo", 2, "xx")
		assert.Equal(r.t, []any{nil, "OK", "2"}, []any{v1, v2, r.r("get", "foo")})
	}},
	{"Extended SET GET option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		old := r.r("set", "foo", "bar2", "GET")
		assert.Equal(r.t, []any{"bar", "bar2"}, []any{old, r.r("get", "foo")})
	}},
	{"Extended SET GET option with no previous value", func(r *suite) {
		r.r("del", "foo")
		old := r.r("set", "foo", "bar", "GET")
		assert.Equal(r.t, []any{nil, "bar"}, []any{old, r.r("get", "foo")})
	}},
	{"Extended SET GET option with XX", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		old := r.r("set", "foo", "baz", "GET", "XX")
		assert.Equal(r.t, []any{"bar", "baz"}, []any{old, r.r("get", "foo")})
	}},
	{"Extended SET GET option with XX and no previous value", func(r *suite) {
		r.r("del", "foo")
		old := r.r("set", "foo", "bar", "GET", "XX")
		assert.Equal(r.t, []any{nil, nil}, []any{old, r.r("get", "foo")})
	}},
	{"Extended SET GET option with NX", func(r *suite) {
		r.r("del", "foo")
		old := r.r("set", "foo", "bar", "GET", "NX")
		assert.Equal(r.t, []any{nil, "bar"}, []any{old, r.r("get", "foo")})
	}},
	{"Extended SET GET option with NX and previous value", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar")
		old := r.r("set", "foo", "baz", "GET", "NX")
		assert.Equal(r.t, []any{"bar", "bar"}, []any{old, r.r("get", "foo")})
	}},
	{"Extended SET EX option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar", "ex", 10)
		ttl := r.int("ttl", "foo")
		assert.True(r.t, ttl <= 10 && ttl > 5, "%d", ttl)
	}},
	{"Extended SET PX option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar", "px", 10000)
		ttl := r.int("ttl", "foo")
		assert.True(r.t, ttl <= 10 && ttl > 5, "%d", ttl)
	}},
	{"Extended SET EXAT option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar", "exat", clockSeconds()+10)
		r.assertRange(r.int("ttl", "foo"), 5, 10)
	}},
	{"Extended SET PXAT option", func(r *suite) {
		r.r("del", "foo")
		r.r("set", "foo", "bar", "pxat", clockMilliseconds()+10000)
		r.assertRange(r.int("ttl", "foo"), 5, 10)
	}},
	{"Extended SET using multiple options at once", func(r *suite) {
		r.r("set", "foo", "val")
		assert.Equal(r.t, "OK", r.r("set", "foo", "bar", "xx", "px", 10000))
		ttl := r.int("ttl", "foo")
		assert.True(r.t, ttl <= 10 && ttl > 5, "%d", ttl)
	}},
}

// runSuite runs the cases on c as Redis's harness does: SELECT 9 and
// FLUSHALL first, then each case in order on one connection.
func runSuite(t *testing.T, c *redis.Client, cases []suiteCase) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	require.NoError(t, c.Do(ctx, "SELECT", 9).Err())
	require.NoError(t, c.Do(ctx, "FLUSHALL").Err())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(&suite{t: t, c: c, ctx: ctx})
		})
	}
}

// suiteClient is one connection, RESP2, as the harness's.
func suiteClient(t *testing.T, addr, password string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: 2, PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRedisSuite runs Redis's expire and extended SET tests against
// kvserver with Redis 7's active expiry tuning (a cycle every 100 ms, as
// Redis's hz 10), which "Redis should actively expire keys incrementally"
// assumes. The two suites run at once on servers of their own.
func TestRedisSuite(t *testing.T) {
	for name, cases := range map[string][]suiteCase{"expire": expireSuite, "string": stringSuite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, addr := startServer(t, Config{Expiry: redis7Options()})
			runSuite(t, suiteClient(t, addr, ""), cases)
		})
	}
}

// TestRedisSuiteOnRedis runs the same cases against a real redis-server of
// the test's own (FLUSHALL and DEBUG never touch the shared one), so that
// every case is known to hold for Redis as ported.
func TestRedisSuiteOnRedis(t *testing.T) {
	for name, cases := range map[string][]suiteCase{"expire": expireSuite, "string": stringSuite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rs := redistest.StartRedis(t, redistest.RedisServerOptions{Args: []string{"--enable-debug-command", "yes"}})
			runSuite(t, suiteClient(t, rs.Addr, ""), cases)
		})
	}
}
