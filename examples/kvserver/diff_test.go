package main

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv"
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
func TestDifferential(t *testing.T) {
	r := testenv.OpenRedis(t)
	ctx := testContext(t)
	opts, err := redis.ParseURL(os.Getenv(testenv.EnvRedis))
	require.NoError(t, err)
	// One connection each, RESP2 on both sides, so that per-connection
	// commands (CLIENT SETNAME) and reply types compare.
	opts.Protocol, opts.PoolSize, opts.MaxRetries = 2, 1, -1
	real := redis.NewClient(opts)
	t.Cleanup(func() { _ = real.Close() })
	_, addr := startServer(t, Config{})
	kv := newClient(t, addr, func(o *redis.Options) { o.Protocol, o.PoolSize = 2, 1 })

	p := r.Prefix
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
