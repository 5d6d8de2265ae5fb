package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGoRedisConnects(t *testing.T) {
	_, addr := startServer(t, Config{})
	cases := map[string]func(*redis.Options){
		"defaults (HELLO 3)":      func(*redis.Options) {},
		"protocol 2, no identity": func(o *redis.Options) { o.Protocol = 2; o.DisableIdentity = true },
		"protocol 2, client name": func(o *redis.Options) { o.Protocol = 2; o.ClientName = "tester" },
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			c := newClient(t, addr, opt)
			require.Equal(t, "PONG", c.Ping(ctx).Val())
			require.NoError(t, c.Set(ctx, "k:"+name, "v", 0).Err())
			require.Equal(t, "v", c.Get(ctx, "k:"+name).Val())
		})
	}
	t.Run("RESP3 by default", func(t *testing.T) {
		ctx := testContext(t)
		c := newClient(t, addr, func(o *redis.Options) { o.ClientName = "three"; o.PoolSize = 1 })
		hello, err := c.Do(ctx, "HELLO").Result()
		require.NoError(t, err)
		m, ok := hello.(map[any]any)
		require.True(t, ok, "HELLO's reply is a map in RESP3: %#v", hello)
		assert.Equal(t, int64(3), m["proto"])
		assert.Equal(t, "three", c.ClientGetName(ctx).Val())
		require.ErrorIs(t, c.Get(ctx, "no such key").Err(), redis.Nil)
		info, err := c.Info(ctx, "keyspace").Result()
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(info, "# Keyspace"), "INFO, a verbatim string: %q", info)
	})
	t.Run("client name is kept", func(t *testing.T) {
		ctx := testContext(t)
		c := newClient(t, addr, func(o *redis.Options) { o.ClientName = "named"; o.PoolSize = 1 })
		require.Equal(t, "named", c.ClientGetName(ctx).Val())
	})
	t.Run("a password is accepted as by Redis without one (HELLO 3 AUTH default)", func(t *testing.T) {
		ctx := testContext(t)
		c := newClient(t, addr, func(o *redis.Options) { o.Password = "secret" })
		require.NoError(t, c.Ping(ctx).Err())
	})
	t.Run("db 16 is refused", func(t *testing.T) {
		ctx := testContext(t)
		c := newClient(t, addr, func(o *redis.Options) { o.DB = 16 })
		require.ErrorContains(t, c.Ping(ctx).Err(), "DB index is out of range")
	})
	t.Run("databases 0 to 15 are separate", func(t *testing.T) {
		ctx := testContext(t)
		c0 := newClient(t, addr)
		c15 := newClient(t, addr, func(o *redis.Options) { o.DB = 15 })
		require.NoError(t, c15.Set(ctx, "in15", "v", 0).Err())
		require.Equal(t, "v", c15.Get(ctx, "in15").Val())
		require.ErrorIs(t, c0.Get(ctx, "in15").Err(), redis.Nil)
	})
}

func TestHello(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr, func(o *redis.Options) { o.Protocol = 2; o.PoolSize = 1 })
	m, err := c.Do(ctx, "HELLO", "2", "SETNAME", "hi").Slice()
	require.NoError(t, err)
	require.Len(t, m, 14)
	assert.Equal(t, []any{"server", "redis", "version", version, "proto", int64(2)}, m[:6])
	require.Equal(t, "hi", c.ClientGetName(ctx).Val())
	id, err := c.ClientID(ctx).Result()
	require.NoError(t, err)
	assert.Equal(t, id, m[7])

	assert.EqualError(t, c.Do(ctx, "HELLO", "4").Err(), "NOPROTO unsupported protocol version")
	assert.EqualError(t, c.Do(ctx, "HELLO", "1").Err(), "NOPROTO unsupported protocol version")
	assert.EqualError(t, c.Do(ctx, "HELLO", "x").Err(), "ERR Protocol version is not an integer or out of range")
	assert.EqualError(t, c.Do(ctx, "HELLO", "2", "SETNAME").Err(), "ERR Syntax error in HELLO option 'SETNAME'")
	// No password is set: the default user gets in with any password, no
	// other user exists; a refused HELLO changes nothing.
	assert.NoError(t, c.Do(ctx, "HELLO", "2", "AUTH", "default", "anything").Err())
	assert.EqualError(t, c.Do(ctx, "HELLO", "2", "AUTH", "bob", "pw", "SETNAME", "bob").Err(),
		"WRONGPASS invalid username-password pair or user is disabled.")
	// As in Redis, the credentials are checked before the name.
	assert.EqualError(t, c.Do(ctx, "HELLO", "2", "AUTH", "bob", "pw", "SETNAME", "b b").Err(),
		"WRONGPASS invalid username-password pair or user is disabled.")
	assert.Equal(t, "hi", c.ClientGetName(ctx).Val())
	assert.NoError(t, c.Do(ctx, "CLIENT", "SETINFO", "lib-name", "go-redis").Err())
	assert.EqualError(t, c.Do(ctx, "CLIENT", "SETINFO", "lib-colour", "red").Err(), "ERR Unrecognized option 'lib-colour'")
	assert.EqualError(t, c.Do(ctx, "CLIENT", "SETNAME", "a b").Err(),
		"ERR Client names cannot contain spaces, newlines or special characters.")
	assert.EqualError(t, c.Do(ctx, "CLIENT", "PAUSE").Err(), "ERR unknown subcommand 'PAUSE'. Try CLIENT HELP.")
	assert.EqualError(t, c.Do(ctx, "CLIENT").Err(), "ERR wrong number of arguments for 'client' command")
	assert.EqualError(t, c.Do(ctx, "CLIENT", "ID", "x").Err(), "ERR wrong number of arguments for 'client|id' command")
	help, err := c.Do(ctx, "CLIENT", "HELP").StringSlice()
	require.NoError(t, err)
	assert.Contains(t, help, "SETNAME <name>")
}

func TestKeyCommands(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)

	require.Equal(t, int64(0), c.DBSize(ctx).Val())
	require.NoError(t, c.Set(ctx, "a", "1", 0).Err())
	require.NoError(t, c.Set(ctx, "b", "\x00\r\n binary", 0).Err())
	require.Equal(t, "\x00\r\n binary", c.Get(ctx, "b").Val())
	require.ErrorIs(t, c.Get(ctx, "nope").Err(), redis.Nil)
	require.Equal(t, int64(2), c.DBSize(ctx).Val())
	require.Equal(t, int64(3), c.Exists(ctx, "a", "b", "a", "nope").Val())
	require.Equal(t, int64(1), c.Del(ctx, "a", "nope", "a").Val())
	require.Equal(t, int64(1), c.DBSize(ctx).Val())
	require.Equal(t, "OK", c.FlushDB(ctx).Val())
	require.Equal(t, int64(0), c.DBSize(ctx).Val())
	require.EqualError(t, c.Do(ctx, "FLUSHDB", "LATER").Err(), errSyntax)
	require.Equal(t, "OK", c.Do(ctx, "flushdb", "async").Val())
	require.Equal(t, "hi", c.Echo(ctx, "hi").Val())
	require.Equal(t, "x", c.Do(ctx, "PING", "x").Val())
}

func TestSet(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)

	do := func(args ...any) (any, error) { return c.Do(ctx, args...).Result() }
	ok := func(want any, args ...any) {
		t.Helper()
		got, err := do(args...)
		require.NoError(t, err, "%v", args)
		require.Equal(t, want, got, "%v", args)
	}
	nilReply := func(args ...any) {
		t.Helper()
		_, err := do(args...)
		require.ErrorIs(t, err, redis.Nil, "%v", args)
	}
	fails := func(msg string, args ...any) {
		t.Helper()
		_, err := do(args...)
		require.EqualError(t, err, msg, "%v", args)
	}

	nilReply("SET", "k", "v", "XX")
	ok("OK", "SET", "k", "v", "NX")
	nilReply("SET", "k", "w", "NX")
	ok("v", "GET", "k")
	ok("v", "SET", "k", "w", "XX", "GET")
	ok("w", "SET", "k", "x", "NX", "GET") // NX fails, GET still answers
	ok("w", "GET", "k")
	nilReply("SET", "new", "1", "GET")
	ok("OK", "SET", "t", "v", "EX", "100")
	ttl := c.TTL(ctx, "t").Val()
	require.InDelta(t, 100*time.Second, ttl, float64(2*time.Second))
	ok("OK", "set", "t", "v2", "keepttl")
	require.InDelta(t, 100*time.Second, c.TTL(ctx, "t").Val(), float64(2*time.Second))
	ok("OK", "SET", "t", "v3")
	require.Equal(t, time.Duration(-1), c.TTL(ctx, "t").Val())
	ok("OK", "SET", "t", "v", "PX", "100000")
	require.InDelta(t, 100*time.Second, c.PTTL(ctx, "t").Val(), float64(2*time.Second))
	at := time.Now().Add(time.Hour).Unix()
	ok("OK", "SET", "t", "v", "EXAT", at)
	ok(at, "EXPIRETIME", "t")
	ok("OK", "SET", "t", "v", "PXAT", at*1000+5)
	ok(at*1000+5, "PEXPIRETIME", "t")
	ok("OK", "SET", "t", "v", "PXAT", 1) // in the past: the key is gone
	nilReply("GET", "t")
	ok("OK", "SET", "t", "v", "EX", "1", "EX", "100") // the last EX wins, as in Redis
	require.Greater(t, c.TTL(ctx, "t").Val(), 50*time.Second)

	fails(errExpireTime("set"), "SET", "k", "v", "EX", "0")
	fails(errExpireTime("set"), "SET", "k", "v", "PX", "-5")
	fails(errExpireTime("set"), "SET", "k", "v", "EX", "9223372036854775807")
	fails(errExpireTime("set"), "SET", "k", "v", "PX", "9223372036854775807")
	fails(errNotInteger, "SET", "k", "v", "EX", "1.5")
	fails(errNotInteger, "SET", "k", "v", "EX", "+5")
	fails(errNotInteger, "SET", "k", "v", "EX", "05")
	fails(errNotInteger, "SET", "k", "v", "EX", "99999999999999999999")
	fails(errSyntax, "SET", "k", "v", "EX")
	fails(errSyntax, "SET", "k", "v", "NX", "XX")
	fails(errSyntax, "SET", "k", "v", "EX", "10", "PX", "10")
	fails(errSyntax, "SET", "k", "v", "KEEPTTL", "EX", "10")
	fails(errSyntax, "SET", "k", "v", "EX", "10", "KEEPTTL")
	fails(errSyntax, "SET", "k", "v", "EX", "abc", "BOGUS")
	fails(errArity("set"), "SET", "k")
	ok("w", "GET", "k") // failed SETs changed nothing
}

func TestExpireCommands(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)
	do := func(args ...any) any {
		t.Helper()
		v, err := c.Do(ctx, args...).Result()
		require.NoError(t, err, "%v", args)
		return v
	}
	fails := func(msg string, args ...any) {
		t.Helper()
		require.EqualError(t, c.Do(ctx, args...).Err(), msg, "%v", args)
	}

	require.Equal(t, int64(0), do("EXPIRE", "missing", "10"))
	require.Equal(t, int64(-2), do("TTL", "missing"))
	require.Equal(t, int64(-2), do("PTTL", "missing"))
	require.Equal(t, int64(-2), do("EXPIRETIME", "missing"))
	do("SET", "k", "v")
	require.Equal(t, int64(-1), do("TTL", "k"))
	require.Equal(t, int64(-1), do("EXPIRETIME", "k"))
	require.Equal(t, int64(0), do("PERSIST", "k"))
	require.Equal(t, int64(0), do("EXPIRE", "k", "100", "XX"))
	require.Equal(t, int64(0), do("EXPIRE", "k", "100", "GT")) // no deadline counts as infinite
	require.Equal(t, int64(1), do("EXPIRE", "k", "100", "NX"))
	require.Equal(t, int64(100), do("TTL", "k"))
	require.Equal(t, int64(0), do("EXPIRE", "k", "200", "NX"))
	require.Equal(t, int64(1), do("EXPIRE", "k", "200", "XX"))
	require.Equal(t, int64(0), do("EXPIRE", "k", "150", "GT"))
	require.Equal(t, int64(1), do("EXPIRE", "k", "300", "gt"))
	require.Equal(t, int64(0), do("EXPIRE", "k", "400", "LT"))
	require.Equal(t, int64(1), do("PEXPIRE", "k", "250000", "LT"))
	require.InDelta(t, 250000, do("PTTL", "k"), 2000)
	at := time.Now().Add(time.Hour).Unix()
	require.Equal(t, int64(1), do("EXPIREAT", "k", at))
	require.Equal(t, at, do("EXPIRETIME", "k"))
	require.Equal(t, int64(1), do("PEXPIREAT", "k", at*1000+1))
	require.Equal(t, at*1000+1, do("PEXPIRETIME", "k"))
	require.Equal(t, int64(1), do("PERSIST", "k"))
	require.Equal(t, int64(-1), do("PTTL", "k"))

	fails(errNotInteger, "EXPIRE", "k", "ten")
	fails("ERR Unsupported option FOO", "EXPIRE", "k", "10", "FOO")
	// Redis checks the options before the time.
	fails("ERR Unsupported option FOO", "EXPIRE", "k", "ten", "FOO")
	fails("ERR GT and LT options at the same time are not compatible", "PEXPIREAT", "k", "ten", "GT", "LT")
	fails("ERR NX and XX, GT or LT options at the same time are not compatible", "EXPIRE", "k", "10", "NX", "GT")
	fails("ERR GT and LT options at the same time are not compatible", "EXPIRE", "k", "10", "GT", "LT")
	fails(errExpireTime("expire"), "EXPIRE", "k", "9223372036854775807")
	fails(errExpireTime("expire"), "EXPIRE", "k", "-9223372036854775807")
	fails(errExpireTime("pexpire"), "PEXPIRE", "k", "9223372036854775807")
	fails(errArity("expire"), "EXPIRE", "k")
	fails(errArity("ttl"), "TTL")
	fails(errArity("persist"), "PERSIST", "a", "b")

	// A deadline that is not in the future deletes the key and answers 1.
	for _, args := range [][]any{
		{"EXPIRE", "k", "0"}, {"EXPIRE", "k", "-10"}, {"PEXPIRE", "k", "-1"},
		{"EXPIREAT", "k", "1"}, {"PEXPIREAT", "k", "0"},
	} {
		do("SET", "k", "v")
		require.Equal(t, int64(1), do(args...), "%v", args)
		require.Equal(t, int64(0), do("EXISTS", "k"), "%v", args)
	}
}

func TestErrors(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"FOOBAR"}, "ERR unknown command 'FOOBAR', with args beginning with: "},
		{[]any{"foobar", "a", "b c"}, "ERR unknown command 'foobar', with args beginning with: 'a' 'b c' "},
		{[]any{"x\r\ny", "1"}, "ERR unknown command 'x  y', with args beginning with: '1' "},
		{[]any{"GET"}, errArity("get")},
		{[]any{"get", "a", "b"}, errArity("get")},
		{[]any{"PING", "a", "b"}, errArity("ping")},
		{[]any{"ECHO"}, errArity("echo")},
		{[]any{"DBSIZE", "x"}, errArity("dbsize")},
		{[]any{"DEL"}, errArity("del")},
		{[]any{"SELECT", "x"}, errNotInteger},
		{[]any{"SELECT", "16"}, "ERR DB index is out of range"},
		{[]any{"SELECT", "-1"}, "ERR DB index is out of range"},
		{[]any{"COMMAND", "BOGUS"}, "ERR unknown subcommand 'BOGUS'. Try COMMAND HELP."},
	}
	for _, tc := range cases {
		require.EqualError(t, c.Do(ctx, tc.args...).Err(), tc.want, "%q", tc.args)
	}
	long := strings.Repeat("z", 300)
	err := c.Do(ctx, long, long).Err()
	require.EqualError(t, err, "ERR unknown command '"+long[:128]+"', with args beginning with: '"+long[:128]+"' ")
	// The connection is still usable after errors.
	require.Equal(t, "PONG", c.Ping(ctx).Val())
}

func TestCommandAndInfo(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr, func(o *redis.Options) { o.Protocol = 2 })

	infos, err := c.Command(ctx).Result()
	require.NoError(t, err)
	require.Contains(t, infos, "get")
	assert.Equal(t, int8(2), infos["get"].Arity)
	assert.Equal(t, int8(-3), infos["set"].Arity)
	assert.Contains(t, infos["set"].Flags, "write")
	n, err := c.Do(ctx, "COMMAND", "COUNT").Int()
	require.NoError(t, err)
	assert.Equal(t, len(infos), n)
	docs, err := c.Do(ctx, "COMMAND", "DOCS").Slice()
	require.NoError(t, err)
	assert.Len(t, docs, 2*n, "a name and a documentation map per command")
	getDocs, err := c.Do(ctx, "COMMAND", "DOCS", "get", "nope").Slice()
	require.NoError(t, err)
	require.Len(t, getDocs, 2)
	assert.Equal(t, "get", getDocs[0])
	assert.Equal(t, []any{"summary", "Get the value of a key"}, getDocs[1].([]any)[:2])
	set, err := c.Do(ctx, "COMMAND", "INFO", "set").Slice()
	require.NoError(t, err)
	assert.Len(t, set[0], 10, "Redis 7's COMMAND INFO entry has 10 fields")
	one, err := c.Do(ctx, "COMMAND", "INFO", "ttl", "nope").Slice()
	require.NoError(t, err)
	require.Len(t, one, 2)
	assert.Equal(t, "ttl", one[0].([]any)[0])
	assert.Nil(t, one[1])

	require.NoError(t, c.Set(ctx, "a", "1", 0).Err())
	require.NoError(t, c.Set(ctx, "b", "1", time.Hour).Err())
	info, err := c.Info(ctx).Result()
	require.NoError(t, err)
	assert.Contains(t, info, "# Server\r\nredis_version:"+version+"\r\n")
	assert.Contains(t, info, "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\n")
	assert.Contains(t, info, "# Expiry\r\n")
	only, err := c.Info(ctx, "keyspace").Result()
	require.NoError(t, err)
	assert.Equal(t, "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\n", only)
	none, err := c.Info(ctx, "nosuchsection").Result()
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestPipeline(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 2000 {
			p.Set(ctx, fmt.Sprint("k", i), i, 0)
			p.Get(ctx, fmt.Sprint("k", i))
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, cmds, 4000)
	for i := range 2000 {
		require.Equal(t, fmt.Sprint(i), cmds[2*i+1].(*redis.StringCmd).Val())
	}
	require.Equal(t, int64(2000), c.DBSize(ctx).Val())
}

// TestSetNXIsAtomic races clients on SET NX GET: exactly one wins and every
// loser sees the winner's value, as with Redis's one command at a time.
func TestSetNXIsAtomic(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr, func(o *redis.Options) { o.PoolSize = 16 })
	for round := range 20 {
		key := fmt.Sprint("race", round)
		var wg sync.WaitGroup
		results := make([]error, 16)
		olds := make([]string, 16)
		for i := range 16 {
			wg.Go(func() {
				olds[i], results[i] = c.Do(ctx, "SET", key, fmt.Sprint(i), "NX", "GET").Text()
			})
		}
		wg.Wait()
		winners, winner := 0, ""
		for i, err := range results {
			if err == redis.Nil {
				winners++
				winner = fmt.Sprint(i)
			} else {
				require.NoError(t, err)
			}
		}
		require.Equal(t, 1, winners)
		for i, err := range results {
			if err == nil {
				require.Equal(t, winner, olds[i])
			}
		}
	}
}

func TestQuit(t *testing.T) {
	_, addr := startServer(t, Config{})
	rc := dialRaw(t, addr)
	rc.send("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
	require.Equal(t, "+PONG", rc.line())
	require.Equal(t, "+OK", rc.line())
	rc.closed()
}

func TestInline(t *testing.T) {
	_, addr := startServer(t, Config{})
	rc := dialRaw(t, addr)
	rc.send("SET k \"a b\\x41\\n\"\r\n\r\nGET k\nGET 'it\\'s'\r\nget\r\n")
	require.Equal(t, "+OK", rc.line())
	require.Equal(t, "$5", rc.line())
	require.Equal(t, "a bA\n", rc.line()) // the value's own newline ends the line
	require.Equal(t, "", rc.line())
	require.Equal(t, "$-1", rc.line())
	require.Equal(t, "-"+errArity("get"), rc.line())
}

func TestCloseDisconnectsClients(t *testing.T) {
	srv, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)
	require.Equal(t, "PONG", c.Ping(ctx).Val())
	rc := dialRaw(t, addr)
	rc.send("PING\r\n")
	require.Equal(t, "+PONG", rc.line())
	require.NoError(t, srv.Close())
	rc.closed()
	require.Error(t, c.Ping(ctx).Err())
	require.NoError(t, srv.Close(), "Close is idempotent")
}

// TestPassiveExpiryThroughServer uses real short TTLs with a bounded wait.
func TestPassiveExpiryThroughServer(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)
	require.NoError(t, c.Set(ctx, "short", "v", 0).Err())
	require.True(t, c.PExpire(ctx, "short", 50*time.Millisecond).Val())
	require.Eventually(t, func() bool {
		return c.Get(ctx, "short").Err() == redis.Nil
	}, 2*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(-2), c.Do(ctx, "TTL", "short").Val())
	require.Equal(t, int64(0), c.Exists(ctx, "short").Val())
}

// TestIncrIsAtomic: INCR reads and writes as one step, so concurrent
// counters lose no increment.
func TestIncrIsAtomic(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr, func(o *redis.Options) { o.PoolSize = 8 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				assert.NoError(t, c.Incr(ctx, "counter").Err())
				assert.NoError(t, c.IncrByFloat(ctx, "float", 0.5).Err())
			}
		})
	}
	wg.Wait()
	require.Equal(t, "1600", c.Get(ctx, "counter").Val())
	require.Equal(t, "800", c.Get(ctx, "float").Val())
}

// TestOptimisticLocking is go-redis's WATCH pattern: read, compute, and
// write in MULTI/EXEC, retrying when another client wrote first. No
// update is lost and EXEC sometimes aborts.
func TestOptimisticLocking(t *testing.T) {
	_, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr, func(o *redis.Options) { o.PoolSize = 8 })
	var aborted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				for {
					err := c.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "balance").Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "balance", n+1, 0)
							return nil
						})
						return err
					}, "balance")
					if errors.Is(err, redis.TxFailedErr) {
						aborted.Add(1)
						continue
					}
					assert.NoError(t, err)
					break
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, "400", c.Get(ctx, "balance").Val())
	t.Logf("%d transactions aborted by a concurrent write", aborted.Load())
}
