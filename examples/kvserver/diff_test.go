package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// step is one command of the differential script and how to compare its
// replies: exactly, or as integers within tol (TTL values depend on when
// each server ran the command).
type step struct {
	args []any
	tol  int64
}

// TestDifferential runs one script of commands against kvserver and against
// the real Redis named by TTLKIT_TEST_REDIS_URL, and requires the same
// replies, errors included. Every key is under the test's unique prefix,
// and the script never runs a command that touches other keys.
//
// The script runs in RESP2 and again in RESP3.
func TestDifferential(t *testing.T) {
	r := redistest.OpenRedis(t)
	_, addr := startServer(t, Config{})
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", proto), func(t *testing.T) {
			differential(t, r.Prefix+fmt.Sprint(proto, ":"), addr, proto)
		})
	}
}

func differential(t *testing.T, p, addr string, proto int) {
	ctx := testContext(t)
	opts, err := redis.ParseURL(os.Getenv(testenv.EnvRedis))
	require.NoError(t, err)
	// One connection each, the same protocol on both sides, so that
	// per-connection commands (CLIENT SETNAME) and reply types compare.
	opts.Protocol, opts.PoolSize, opts.MaxRetries = proto, 1, -1
	real := redis.NewClient(opts)
	t.Cleanup(func() { _ = real.Close() })
	kv := newClient(t, addr, func(o *redis.Options) { o.Protocol, o.PoolSize = proto, 1 })

	k := func(name string) string { return p + name }
	now := time.Now()
	inHour := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	inHourMS := strconv.FormatInt(now.Add(time.Hour).UnixMilli()+7, 10)
	script := []step{
		{args: []any{"PING"}},
		{args: []any{"PING", "hello"}},
		{args: []any{"PING", "a", "b"}},
		{args: []any{"ECHO", "\x00bin\r\nary"}},
		{args: []any{"ECHO"}},
		{args: []any{"SET", k("a"), "1"}},
		{args: []any{"GET", k("a")}},
		{args: []any{"GET", k("missing")}},
		{args: []any{"get", k("a"), "extra"}},
		{args: []any{"SET", k("a"), "2", "NX"}},
		{args: []any{"SET", k("a"), "2", "XX"}},
		{args: []any{"SET", k("b"), "1", "XX"}},
		{args: []any{"SET", k("b"), "1", "NX", "GET"}},
		{args: []any{"SET", k("b"), "2", "NX", "GET"}},
		{args: []any{"SET", k("b"), "3", "XX", "GET"}},
		{args: []any{"SET", k("b"), "4", "get"}},
		{args: []any{"GET", k("b")}},
		{args: []any{"SET", k("t"), "v", "EX", "100"}},
		{args: []any{"TTL", k("t")}, tol: 1},
		{args: []any{"PTTL", k("t")}, tol: 500},
		{args: []any{"SET", k("t"), "w", "KEEPTTL"}},
		{args: []any{"TTL", k("t")}, tol: 1},
		{args: []any{"SET", k("t"), "x"}},
		{args: []any{"TTL", k("t")}},
		{args: []any{"SET", k("t"), "v", "px", "100000"}},
		{args: []any{"PTTL", k("t")}, tol: 500},
		{args: []any{"SET", k("t"), "v", "EXAT", inHour}},
		{args: []any{"EXPIRETIME", k("t")}},
		{args: []any{"SET", k("t"), "v", "PXAT", inHourMS}},
		{args: []any{"PEXPIRETIME", k("t")}},
		{args: []any{"EXPIRETIME", k("t")}},
		{args: []any{"SET", k("gone"), "v", "PXAT", "1"}},
		{args: []any{"GET", k("gone")}},
		{args: []any{"EXISTS", k("gone")}},
		{args: []any{"SET", k("e"), "v", "EX", "0"}},
		{args: []any{"SET", k("e"), "v", "EX", "-5"}},
		{args: []any{"SET", k("e"), "v", "PX", "0"}},
		{args: []any{"SET", k("e"), "v", "EXAT", "0"}},
		{args: []any{"SET", k("e"), "v", "EX", "abc"}},
		{args: []any{"SET", k("e"), "v", "EX", "1.5"}},
		{args: []any{"SET", k("e"), "v", "EX", "+5"}},
		{args: []any{"SET", k("e"), "v", "EX", "05"}},
		{args: []any{"SET", k("e"), "v", "EX", "9223372036854775807"}},
		{args: []any{"SET", k("e"), "v", "EX", "9223372036854775"}},
		{args: []any{"SET", k("e"), "v", "PX", "9223372036854775807"}},
		{args: []any{"SET", k("e"), "v", "EX"}},
		{args: []any{"SET", k("e"), "v", "NX", "XX"}},
		{args: []any{"SET", k("e"), "v", "XX", "NX"}},
		{args: []any{"SET", k("e"), "v", "EX", "10", "PX", "10"}},
		{args: []any{"SET", k("e"), "v", "KEEPTTL", "EX", "10"}},
		{args: []any{"SET", k("e"), "v", "PXAT", "10", "KEEPTTL"}},
		{args: []any{"SET", k("e"), "v", "EX", "abc", "FOO"}},
		{args: []any{"SET", k("e"), "v", "EX", "10", "EX", "20"}},
		{args: []any{"TTL", k("e")}, tol: 1},
		{args: []any{"SET", k("e")}},
		{args: []any{"SET"}},
		{args: []any{"DEL", k("a"), k("b"), k("missing"), k("a")}},
		{args: []any{"DEL"}},
		{args: []any{"EXISTS", k("t"), k("t"), k("missing")}},
		{args: []any{"EXISTS"}},
		{args: []any{"SET", k("x"), "v"}},
		{args: []any{"TTL", k("x")}},
		{args: []any{"PTTL", k("x")}},
		{args: []any{"TTL", k("missing")}},
		{args: []any{"PTTL", k("missing")}},
		{args: []any{"EXPIRETIME", k("x")}},
		{args: []any{"EXPIRETIME", k("missing")}},
		{args: []any{"TTL"}},
		{args: []any{"PERSIST", k("x")}},
		{args: []any{"PERSIST", k("missing")}},
		{args: []any{"EXPIRE", k("missing"), "100"}},
		{args: []any{"EXPIRE", k("x"), "100", "XX"}},
		{args: []any{"EXPIRE", k("x"), "100", "GT"}},
		{args: []any{"EXPIRE", k("x"), "100", "LT"}},
		{args: []any{"TTL", k("x")}, tol: 1},
		{args: []any{"EXPIRE", k("x"), "200", "NX"}},
		{args: []any{"EXPIRE", k("x"), "200", "XX"}},
		{args: []any{"EXPIRE", k("x"), "150", "GT"}},
		{args: []any{"EXPIRE", k("x"), "300", "gt"}},
		{args: []any{"EXPIRE", k("x"), "400", "LT"}},
		{args: []any{"PEXPIRE", k("x"), "250000", "lt"}},
		{args: []any{"PTTL", k("x")}, tol: 500},
		{args: []any{"EXPIRE", k("x"), "10", "NX", "XX"}},
		{args: []any{"EXPIRE", k("x"), "10", "XX", "GT", "NX"}},
		{args: []any{"EXPIRE", k("x"), "10", "GT", "LT"}},
		{args: []any{"EXPIRE", k("x"), "10", "FOO"}},
		{args: []any{"EXPIRE", k("x"), "ten"}},
		{args: []any{"EXPIRE", k("x"), "ten", "FOO"}},
		{args: []any{"PEXPIREAT", k("x"), "ten", "NX", "XX"}},
		{args: []any{"EXPIRE", k("x"), "9223372036854775807"}},
		{args: []any{"EXPIRE", k("x"), "-9223372036854775807"}},
		{args: []any{"PEXPIRE", k("x"), "9223372036854775807"}},
		{args: []any{"EXPIRE", k("x")}},
		{args: []any{"EXPIREAT", k("x"), inHour}},
		{args: []any{"EXPIRETIME", k("x")}},
		{args: []any{"PEXPIREAT", k("x"), inHourMS}},
		{args: []any{"PEXPIRETIME", k("x")}},
		{args: []any{"PERSIST", k("x")}},
		{args: []any{"PERSIST", k("x")}},
		{args: []any{"TTL", k("x")}},
		{args: []any{"EXPIRE", k("x"), "0"}},
		{args: []any{"GET", k("x")}},
		{args: []any{"SET", k("y"), "v"}},
		{args: []any{"EXPIRE", k("y"), "-1"}},
		{args: []any{"EXISTS", k("y")}},
		{args: []any{"SET", k("y"), "v"}},
		{args: []any{"PEXPIREAT", k("y"), "1"}},
		{args: []any{"GET", k("y")}},
		{args: []any{"SET", k("y"), "v", "EX", "100"}},
		{args: []any{"EXPIRE", k("y"), "-5", "LT"}},
		{args: []any{"EXISTS", k("y")}},
		{args: []any{"FOOBAR", k("y"), "arg two"}},
		{args: []any{"foobar"}},
		{args: []any{"SELECT", "0"}},
		{args: []any{"SELECT", "x"}},
		{args: []any{"CLIENT", "SETNAME", "kv-diff"}},
		{args: []any{"CLIENT", "GETNAME"}},
		{args: []any{"CLIENT", "SETNAME", "bad name"}},
		{args: []any{"CLIENT", "NOSUCH"}},
		{args: []any{"CLIENT"}},
		{args: []any{"CLIENT", "GETNAME", "x"}},
		{args: []any{"COMMAND", "NOSUCH"}},
		{args: []any{"HELLO", "4"}},
		{args: []any{"HELLO", "x"}},
		{args: []any{"HELLO", "2", "AUTH", "bob", "pw"}},
		{args: []any{"AUTH", "secret"}},
		{args: []any{"DBSIZE", "x"}},
		{args: []any{"PERSIST"}},
		// Commands added for Redis's own test suite and common clients.
		{args: []any{"SETEX", k("s"), "100", "v"}},
		{args: []any{"TTL", k("s")}, tol: 1},
		{args: []any{"SETEX", k("s"), "0", "v"}},
		{args: []any{"SETEX", k("s"), "-1", "v"}},
		{args: []any{"SETEX", k("s"), "x", "v"}},
		{args: []any{"SETEX", k("s"), "100"}},
		{args: []any{"PSETEX", k("s"), "100000", "w"}},
		{args: []any{"PTTL", k("s")}, tol: 500},
		{args: []any{"PSETEX", k("s"), "0", "w"}},
		{args: []any{"PSETEX", k("s"), "9223372036854775807", "w"}},
		{args: []any{"GET", k("s")}},
		{args: []any{"GETEX", k("s")}},
		{args: []any{"GETEX", k("s"), "PERSIST"}},
		{args: []any{"TTL", k("s")}},
		{args: []any{"GETEX", k("s"), "EX", "100"}},
		{args: []any{"TTL", k("s")}, tol: 1},
		{args: []any{"GETEX", k("s"), "PX", "200000"}},
		{args: []any{"PTTL", k("s")}, tol: 500},
		{args: []any{"GETEX", k("s"), "EXAT", inHour}},
		{args: []any{"EXPIRETIME", k("s")}},
		{args: []any{"GETEX", k("s"), "PXAT", inHourMS}},
		{args: []any{"PEXPIRETIME", k("s")}},
		{args: []any{"GETEX", k("s"), "EX", "0"}},
		{args: []any{"GETEX", k("s"), "EX", "10", "PX", "10"}},
		{args: []any{"GETEX", k("s"), "PERSIST", "EX", "10"}},
		{args: []any{"GETEX", k("s"), "KEEPTTL"}},
		{args: []any{"GETEX", k("s"), "NX"}},
		{args: []any{"GETEX", k("s"), "EX"}},
		{args: []any{"GETEX", k("missing"), "EX", "10"}},
		{args: []any{"GETEX", k("missing"), "EX", "-10"}},
		{args: []any{"GETEX", k("s"), "PXAT", "1"}},
		{args: []any{"EXISTS", k("s")}},
		{args: []any{"GETEX"}},
		{args: []any{"SET", k("g"), "v"}},
		{args: []any{"GETDEL", k("g")}},
		{args: []any{"GETDEL", k("g")}},
		{args: []any{"GETDEL"}},
		{args: []any{"MSET", k("m1"), "1", k("m2"), "2", k("m1"), "3"}},
		{args: []any{"MGET", k("m1"), k("m2"), k("missing")}},
		{args: []any{"MSET", k("m1")}},
		{args: []any{"MSET", k("m1"), "1", k("m2")}},
		{args: []any{"MGET"}},
		{args: []any{"STRLEN", k("m1")}},
		{args: []any{"STRLEN", k("missing")}},
		{args: []any{"TYPE", k("m1")}},
		{args: []any{"TYPE", k("missing")}},
		{args: []any{"DEL", k("m1"), k("m2")}},
		// The integer family.
		{args: []any{"INCR", k("n")}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"DECR", k("n")}},
		{args: []any{"INCRBY", k("n"), "41"}},
		{args: []any{"DECRBY", k("n"), "-8"}},
		{args: []any{"DECRBY", k("n"), "50"}},
		{args: []any{"GET", k("n")}},
		{args: []any{"INCRBY", k("n"), "x"}},
		{args: []any{"INCRBY", k("n"), "1.5"}},
		{args: []any{"INCRBY", k("n"), " 1"}},
		{args: []any{"INCRBY", k("n")}},
		{args: []any{"INCR"}},
		{args: []any{"INCR", k("n"), "1"}},
		{args: []any{"DECRBY", k("n"), "-9223372036854775808"}},
		{args: []any{"DECRBY", k("n"), "9223372036854775807"}},
		{args: []any{"DECRBY", k("n"), "9223372036854775807"}},
		{args: []any{"SET", k("n"), "9223372036854775806"}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"GET", k("n")}},
		{args: []any{"SET", k("n"), "-9223372036854775808"}},
		{args: []any{"DECR", k("n")}},
		{args: []any{"INCRBY", k("n"), "-1"}},
		{args: []any{"INCRBY", k("n"), "9223372036854775807"}},
		{args: []any{"SET", k("n"), "abc"}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"SET", k("n"), "010"}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"SET", k("n"), "+1"}},
		{args: []any{"DECR", k("n")}},
		{args: []any{"SET", k("n"), "12345678901234567890"}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"SET", k("n"), ""}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"SET", k("n"), "-0"}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"SET", k("n"), "7", "EX", "100"}},
		{args: []any{"INCR", k("n")}},
		{args: []any{"TTL", k("n")}, tol: 1},
		{args: []any{"INCRBYFLOAT", k("n"), "0.5"}},
		{args: []any{"TTL", k("n")}, tol: 1},
		{args: []any{"DECRBY", k("n"), "1"}},
		{args: []any{"SET", k("f"), "10.5"}},
		{args: []any{"INCRBYFLOAT", k("f"), "0.1"}},
		{args: []any{"INCRBYFLOAT", k("f"), "-5.0e3"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1e300"}},
		{args: []any{"INCRBYFLOAT", k("f"), "-1e300"}},
		{args: []any{"INCRBYFLOAT", k("f"), "0x10"}},
		{args: []any{"INCRBYFLOAT", k("f"), "0x1.8p3"}},
		{args: []any{"INCRBYFLOAT", k("f"), ".5"}},
		{args: []any{"INCRBYFLOAT", k("f"), "5."}},
		{args: []any{"INCRBYFLOAT", k("f"), "+3"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1e-20"}},
		{args: []any{"INCRBYFLOAT", k("f"), "3.0000000000000000001"}},
		{args: []any{"INCRBYFLOAT", k("f"), " 1"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1 "}},
		{args: []any{"INCRBYFLOAT", k("f"), "1x"}},
		{args: []any{"INCRBYFLOAT", k("f"), ""}},
		{args: []any{"INCRBYFLOAT", k("f"), "."}},
		{args: []any{"INCRBYFLOAT", k("f"), "e5"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1e"}},
		{args: []any{"INCRBYFLOAT", k("f"), "--1"}},
		{args: []any{"INCRBYFLOAT", k("f"), "inf"}},
		{args: []any{"INCRBYFLOAT", k("f"), "-Infinity"}},
		{args: []any{"INCRBYFLOAT", k("f"), "nan"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1e5000"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1e-5000"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1e4932"}},
		{args: []any{"GET", k("f")}},
		{args: []any{"SET", k("f"), "1.18e4932"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1.18e4932"}},
		{args: []any{"SET", k("f"), "-0.5"}},
		{args: []any{"INCRBYFLOAT", k("f"), "0.5"}},
		{args: []any{"INCRBYFLOAT", k("f"), "-0.0"}},
		{args: []any{"INCRBYFLOAT", k("fresh"), "2.50"}},
		{args: []any{"TTL", k("fresh")}},
		{args: []any{"INCRBYFLOAT", k("fresh")}},
		{args: []any{"SET", k("f"), "abc"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1"}},
		{args: []any{"INCRBYFLOAT", k("f"), "x"}},
		{args: []any{"SET", k("f"), "inf"}},
		{args: []any{"INCRBYFLOAT", k("f"), "1"}},
		{args: []any{"INCR", k("f")}},
		{args: []any{"INCRBY", k("missing"), "0"}},
		{args: []any{"DEL", k("missing")}},
		// The rest of Redis 7.0's string and generic commands.
		{args: []any{"SETNX", k("nx"), "1"}},
		{args: []any{"SETNX", k("nx"), "2"}},
		{args: []any{"GET", k("nx")}},
		{args: []any{"SETNX", k("nx")}},
		{args: []any{"SET", k("gs"), "old", "EX", "100"}},
		{args: []any{"GETSET", k("gs"), "new"}},
		{args: []any{"TTL", k("gs")}},
		{args: []any{"GETSET", k("gs2"), "v"}},
		{args: []any{"GETSET", k("gs2")}},
		{args: []any{"MSETNX", k("mn1"), "1", k("mn2"), "2"}},
		{args: []any{"MSETNX", k("mn2"), "x", k("mn3"), "3"}},
		{args: []any{"MGET", k("mn1"), k("mn2"), k("mn3")}},
		{args: []any{"MSETNX", k("mn1"), "1", k("mn2")}},
		{args: []any{"MSETNX", k("mn1")}},
		{args: []any{"APPEND", k("ap"), "abc"}},
		{args: []any{"EXPIRE", k("ap"), "100"}},
		{args: []any{"APPEND", k("ap"), "\x00def"}},
		{args: []any{"GET", k("ap")}},
		{args: []any{"TTL", k("ap")}, tol: 1},
		{args: []any{"APPEND", k("ap"), ""}},
		{args: []any{"APPEND", k("ap")}},
		{args: []any{"SETRANGE", k("sr"), "5", "xy"}},
		{args: []any{"GET", k("sr")}},
		{args: []any{"SETRANGE", k("sr"), "0", "ab"}},
		{args: []any{"SETRANGE", k("sr"), "6", "long tail"}},
		{args: []any{"GET", k("sr")}},
		{args: []any{"SETRANGE", k("sr"), "100", ""}},
		{args: []any{"SETRANGE", k("sr2"), "100", ""}},
		{args: []any{"EXISTS", k("sr2")}},
		{args: []any{"SETRANGE", k("sr"), "-1", "x"}},
		{args: []any{"SETRANGE", k("sr"), "x", "x"}},
		{args: []any{"SETRANGE", k("sr"), "536870911", "xy"}},
		{args: []any{"SETRANGE", k("sr"), "9223372036854775807", "xy"}},
		{args: []any{"SET", k("gr"), "Hello World"}},
		{args: []any{"GETRANGE", k("gr"), "0", "4"}},
		{args: []any{"GETRANGE", k("gr"), "-5", "-1"}},
		{args: []any{"GETRANGE", k("gr"), "-1", "-5"}},
		{args: []any{"GETRANGE", k("gr"), "5", "3"}},
		{args: []any{"GETRANGE", k("gr"), "0", "-1"}},
		{args: []any{"GETRANGE", k("gr"), "-100", "100"}},
		{args: []any{"GETRANGE", k("gr"), "20", "30"}},
		{args: []any{"GETRANGE", k("gr"), "-9223372036854775808", "9223372036854775807"}},
		{args: []any{"GETRANGE", k("gr"), "9223372036854775807", "9223372036854775807"}},
		{args: []any{"GETRANGE", k("gr"), "x", "1"}},
		{args: []any{"GETRANGE", k("missing"), "0", "-1"}},
		{args: []any{"SUBSTR", k("gr"), "6", "-1"}},
		{args: []any{"SET", k("rn"), "v", "EX", "100"}},
		{args: []any{"RENAME", k("rn"), k("rn2")}},
		{args: []any{"GET", k("rn2")}},
		{args: []any{"TTL", k("rn2")}, tol: 1},
		{args: []any{"EXISTS", k("rn")}},
		{args: []any{"RENAME", k("rn"), k("rn2")}},
		{args: []any{"RENAME", k("rn2"), k("rn2")}},
		{args: []any{"RENAMENX", k("rn2"), k("rn2")}},
		{args: []any{"SET", k("rn3"), "w"}},
		{args: []any{"RENAMENX", k("rn2"), k("rn3")}},
		{args: []any{"RENAMENX", k("rn2"), k("rn4")}},
		{args: []any{"RENAMENX", k("missing"), k("rn4")}},
		{args: []any{"RENAME", k("rn3"), k("rn4")}},
		{args: []any{"TTL", k("rn4")}},
		{args: []any{"RENAME", k("rn3")}},
		{args: []any{"COPY", k("rn4"), k("cp")}},
		{args: []any{"COPY", k("rn4"), k("cp")}},
		{args: []any{"COPY", k("rn4"), k("cp"), "REPLACE"}},
		{args: []any{"COPY", k("rn4"), k("rn4")}},
		{args: []any{"COPY", k("missing"), k("cp")}},
		{args: []any{"COPY", k("rn4"), k("cp"), "FOO"}},
		{args: []any{"COPY", k("rn4"), k("cp"), "DB"}},
		{args: []any{"COPY", k("rn4"), k("cp"), "DB", "x"}},
		{args: []any{"COPY", k("rn4"), k("cp"), "DB", "16"}},
		{args: []any{"COPY", k("rn4"), k("cp"), "DB", "-1"}},
		{args: []any{"SET", k("ttlsrc"), "v", "PX", "100000"}},
		{args: []any{"COPY", k("ttlsrc"), k("ttldst")}},
		{args: []any{"PTTL", k("ttldst")}, tol: 500},
		{args: []any{"MOVE", k("cp"), "0"}},
		{args: []any{"MOVE", k("cp"), "16"}},
		{args: []any{"MOVE", k("cp"), "x"}},
		{args: []any{"MOVE", k("missing"), "0"}},
		{args: []any{"TOUCH", k("cp"), k("rn4"), k("missing")}},
		{args: []any{"TOUCH"}},
		{args: []any{"UNLINK", k("cp"), k("missing"), k("rn4")}},
		{args: []any{"UNLINK"}},
		{args: []any{"TYPE", k("cp")}},
		{args: []any{"RANDOMKEY", "x"}},
		// Deadlines far beyond what int64 nanoseconds hold.
		{args: []any{"SET", k("far"), "v", "EX", "92233720368547"}},
		{args: []any{"TTL", k("far")}, tol: 1},
		{args: []any{"PEXPIREAT", k("far"), "9223372036854775807"}},
		{args: []any{"PEXPIRETIME", k("far")}},
		{args: []any{"PEXPIREAT", k("far"), "9000000000000000000", "LT"}},
		{args: []any{"PEXPIRETIME", k("far")}},
		{args: []any{"PEXPIREAT", k("far"), "9100000000000000000", "GT"}},
		{args: []any{"PEXPIRETIME", k("far")}},
		{args: []any{"EXPIRETIME", k("far")}},
		{args: []any{"PEXPIREAT", k("far"), "9000000000000000000", "GT"}},
		{args: []any{"SELECT", "15"}},
		{args: []any{"GET", k("far")}},
		{args: []any{"SELECT", "16"}},
		{args: []any{"SELECT", "0"}},
		{args: []any{"GET", k("far")}},
		{args: []any{"SCAN", "x"}},
		{args: []any{"SCAN", "0", "COUNT", "0"}},
		{args: []any{"SCAN", "0", "COUNT", "x"}},
		{args: []any{"SCAN", "0", "MATCH"}},
		{args: []any{"SCAN", "0", "FOO", "1"}},
		{args: []any{"KEYS"}},
		{args: []any{"TIME", "x"}},
		{args: []any{"FLUSHALL", "LATER"}},
		{args: []any{"COMMAND", "INFO", "get", "set", "getex", "expire", "nosuch"}},
		{args: []any{"COMMAND", "DOCS", "getex", "scan", "nosuch"}},
		// LCS, OBJECT, DUMP, RESTORE, SORT, WAIT.
		{args: []any{"SET", k("l1"), "ohmytext"}},
		{args: []any{"SET", k("l2"), "mynewtext"}},
		{args: []any{"LCS", k("l1"), k("l2")}},
		{args: []any{"LCS", k("l1"), k("l2"), "LEN"}},
		{args: []any{"LCS", k("l1"), k("l2"), "IDX"}},
		{args: []any{"LCS", k("l1"), k("l2"), "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"}},
		{args: []any{"LCS", k("l1"), k("l2"), "idx", "withmatchlen"}},
		{args: []any{"LCS", k("l1"), k("l2"), "LEN", "IDX"}},
		{args: []any{"LCS", k("l1"), k("missing")}},
		{args: []any{"LCS", k("missing"), k("missing2"), "IDX"}},
		{args: []any{"LCS", k("l1"), k("l2"), "MINMATCHLEN"}},
		{args: []any{"LCS", k("l1"), k("l2"), "MINMATCHLEN", "x"}},
		{args: []any{"LCS", k("l1"), k("l2"), "FOO"}},
		{args: []any{"LCS", k("l1")}},
		{args: []any{"SET", k("o"), "12"}},
		{args: []any{"OBJECT", "ENCODING", k("o")}},
		{args: []any{"OBJECT", "REFCOUNT", k("o")}},
		{args: []any{"OBJECT", "FREQ", k("o")}},
		{args: []any{"SET", k("o"), "12345"}},
		{args: []any{"OBJECT", "ENCODING", k("o")}},
		{args: []any{"OBJECT", "REFCOUNT", k("o")}},
		{args: []any{"OBJECT", "IDLETIME", k("o")}},
		{args: []any{"SET", k("o"), strings.Repeat("x", 44)}},
		{args: []any{"OBJECT", "ENCODING", k("o")}},
		{args: []any{"SET", k("o"), strings.Repeat("x", 45)}},
		{args: []any{"OBJECT", "ENCODING", k("o")}},
		{args: []any{"SET", k("o"), "-0"}},
		{args: []any{"OBJECT", "ENCODING", k("o")}},
		{args: []any{"OBJECT", "REFCOUNT", k("o")}},
		{args: []any{"OBJECT", "ENCODING", k("missing")}},
		{args: []any{"OBJECT", "FREQ", k("missing")}},
		{args: []any{"OBJECT", "HELP"}},
		{args: []any{"OBJECT", "NOPE"}},
		{args: []any{"OBJECT"}},
		{args: []any{"OBJECT", "ENCODING"}},
		{args: []any{"DUMP", k("o")}},
		{args: []any{"DUMP", k("l1")}},
		{args: []any{"DUMP", k("missing")}},
		{args: []any{"SET", k("long"), strings.Repeat("kvserver ", 20)}},
		{args: []any{"DUMP", k("long")}},
		{args: []any{"RESTORE", k("r"), "0", dumpPayload("restored")}},
		{args: []any{"GET", k("r")}},
		{args: []any{"RESTORE", k("r"), "0", dumpPayload("again")}},
		{args: []any{"RESTORE", k("r"), "100000", dumpPayload(strings.Repeat("ab", 30)), "REPLACE"}},
		{args: []any{"GET", k("r")}},
		{args: []any{"PTTL", k("r")}, tol: 500},
		{args: []any{"RESTORE", k("r2"), "0", "garbage"}},
		{args: []any{"RESTORE", k("r2"), "-1", dumpPayload("v")}},
		{args: []any{"RESTORE", k("r2"), "0", dumpPayload("v"), "FREQ", "256"}},
		{args: []any{"RESTORE", k("r2"), "0", dumpPayload("v"), "IDLETIME", "1", "FREQ", "1"}},
		{args: []any{"SORT", k("l1")}},
		{args: []any{"SORT", k("missing")}},
		{args: []any{"SORT", k("missing"), "BY", "w_*", "GET", "#", "LIMIT", "0", "5", "DESC", "ALPHA"}},
		{args: []any{"SORT", k("l1"), "LIMIT", "0"}},
		{args: []any{"SORT", k("missing"), "STORE", k("l2")}},
		{args: []any{"EXISTS", k("l2")}},
		{args: []any{"SORT_RO", k("l1")}},
		{args: []any{"SORT_RO", k("missing"), "STORE", k("l2")}},
		{args: []any{"WAIT", "0", "0"}},
		{args: []any{"WAIT", "0", "-1"}},
		{args: []any{"WAIT", "x", "0"}},
		{args: []any{"COMMAND", "INFO", "lcs", "dump", "restore", "migrate", "sort", "sort_ro", "wait"}},
		{args: []any{"COMMAND", "DOCS", "lcs", "dump", "restore", "migrate", "sort", "sort_ro", "wait"}},
	}
	for i, s := range script {
		want, wantErr := real.Do(ctx, s.args...).Result()
		got, gotErr := kv.Do(ctx, s.args...).Result()
		what := fmt.Sprintf("step %d: %q", i, s.args)
		if wantErr != nil {
			require.Error(t, gotErr, "%s: redis says %v, kvserver %#v", what, wantErr, got)
			require.Equal(t, wantErr.Error(), gotErr.Error(), what)
			continue
		}
		require.NoError(t, gotErr, what)
		if s.tol > 0 {
			w, ok1 := want.(int64)
			g, ok2 := got.(int64)
			require.True(t, ok1 && ok2, "%s: %#v vs %#v", what, want, got)
			require.InDelta(t, w, g, float64(s.tol), what)
			require.Positive(t, g, what)
			continue
		}
		require.Equal(t, want, got, what)
	}
}

// TestDifferentialKeyspace compares what only a whole keyspace shows —
// FLUSHALL, SELECT, DBSIZE, KEYS, SCAN, TIME, INFO's counters — between
// kvserver and a redis-server of the test's own, which it may flush.
func TestDifferentialKeyspace(t *testing.T) {
	rs := redistest.StartRedis(t, redistest.RedisServerOptions{})
	ctx := testContext(t)
	real := suiteClient(t, rs.Addr, "")
	_, addr := startServer(t, Config{})
	kv := suiteClient(t, addr, "")
	both := func(f func(c *redis.Client) any) (any, any) { return f(real), f(kv) }
	same := func(what string, f func(c *redis.Client) any) {
		t.Helper()
		want, got := both(f)
		require.Equal(t, want, got, what)
	}
	do := func(args ...any) func(c *redis.Client) any {
		return func(c *redis.Client) any {
			v, err := c.Do(ctx, args...).Result()
			if err != nil {
				return err.Error()
			}
			return v
		}
	}
	expiredKeys := func(c *redis.Client) any {
		info, err := c.Info(ctx, "stats").Result()
		require.NoError(t, err)
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "expired_keys:"); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err)
				return n
			}
		}
		t.Fatalf("no expired_keys in %q", info)
		return nil
	}

	same("FLUSHALL", do("FLUSHALL"))
	for i := range 300 {
		same("SET", do("SET", fmt.Sprint("key:", i), i))
	}
	same("SELECT 9", do("SELECT", 9))
	same("SET in 9", do("SET", "nine", "v", "EX", 1000))
	same("DBSIZE 9", do("DBSIZE"))
	same("KEYS in 9", do("KEYS", "*"))
	same("SELECT 0", do("SELECT", 0))
	same("DBSIZE 0", do("DBSIZE"))
	for _, pat := range []string{"key:1?", "key:[12]0", "key:*9", "key:\\*", "*:2[^0-8]", "nomatch*"} {
		same("KEYS "+pat, func(c *redis.Client) any {
			keys, err := c.Keys(ctx, pat).Result()
			require.NoError(t, err)
			slices.Sort(keys)
			return keys
		})
	}
	same("a whole SCAN", func(c *redis.Client) any {
		var all []string
		cursor := uint64(0)
		for calls := 0; ; calls++ {
			keys, next, err := c.Scan(ctx, cursor, "key:1*", 20).Result()
			require.NoError(t, err)
			all = append(all, keys...)
			if cursor = next; cursor == 0 {
				break
			}
			require.Less(t, calls, 1000)
		}
		slices.Sort(all)
		return slices.Compact(all)
	})
	same("SCAN TYPE string", func(c *redis.Client) any {
		n := 0
		for cursor := uint64(0); ; {
			keys, next, err := c.ScanType(ctx, cursor, "", 100, "string").Result()
			require.NoError(t, err)
			n += len(keys)
			if cursor = next; cursor == 0 {
				return n >= 300
			}
		}
	})
	same("TIME", func(c *redis.Client) any {
		tm, err := c.Do(ctx, "TIME").Slice()
		require.NoError(t, err)
		sec, err := strconv.ParseInt(tm[0].(string), 10, 64)
		require.NoError(t, err)
		usec, err := strconv.ParseInt(tm[1].(string), 10, 64)
		require.NoError(t, err)
		return len(tm) == 2 && math.Abs(float64(sec-time.Now().Unix())) <= 2 && usec >= 0 && usec < 1e6
	})

	// SET with a deadline already past counts as an expired key, once it
	// is looked up at the latest.
	before := []any{expiredKeys(real), expiredKeys(kv)}
	same("SET PXAT in the past", do("SET", "past", "v", "PXAT", 1))
	same("GET it", do("GET", "past"))
	same("SETEX then wait", do("PSETEX", "soon", 1, "v"))
	time.Sleep(20 * time.Millisecond)
	same("GET the expired key", do("GET", "soon"))
	after := []any{expiredKeys(real), expiredKeys(kv)}
	require.Equal(t, after[0].(int)-before[0].(int), after[1].(int)-before[1].(int), "expired_keys grew alike")
	require.Equal(t, 2, after[1].(int)-before[1].(int))

	same("FLUSHALL ASYNC", do("FLUSHALL", "ASYNC"))
	same("DBSIZE after FLUSHALL", do("DBSIZE"))
	same("SELECT 9 after FLUSHALL", do("SELECT", 9))
	same("DBSIZE 9 after FLUSHALL", do("DBSIZE"))
}
