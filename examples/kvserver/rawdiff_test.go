package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// rawPair is a connection to kvserver and one to a redis-server of the
// test's own, whose replies are compared byte for byte, so that the RESP
// types (RESP3's nulls, maps, sets, verbatim strings) compare too.
type rawPair struct {
	t             *testing.T
	kvAddr, rAddr string
	kv, real      *rawConn
}

// newRawPair starts kvserver and a redis-server (which the test may flush:
// it is its own, with DEBUG enabled) and connects to each.
func newRawPair(t *testing.T) *rawPair {
	rs := redistest.StartRedis(t, redistest.RedisServerOptions{Args: []string{"--enable-debug-command", "yes"}})
	_, addr := startServer(t, Config{})
	p := &rawPair{t: t, kvAddr: addr, rAddr: rs.Addr}
	p.kv, p.real = dialRaw(t, addr), dialRaw(t, rs.Addr)
	return p
}

// other returns another pair of connections to the same two servers.
func (p *rawPair) other() *rawPair {
	q := *p
	q.kv, q.real = dialRaw(p.t, p.kvAddr), dialRaw(p.t, p.rAddr)
	return &q
}

// helloFields are the parts of HELLO's reply that differ between the two
// servers: the version and the connection's id.
var helloFields = regexp.MustCompile(`(version\r\n)\$\d+\r\n[^\r]*|(id\r\n:)\d+`)

// same sends a command to both servers and requires the same reply, with
// HELLO's version and id left out; it returns kvserver's reply.
func (p *rawPair) same(args ...string) string {
	p.t.Helper()
	want, got := p.real.do(args...), p.kv.do(args...)
	if strings.EqualFold(args[0], "hello") {
		want, got = helloFields.ReplaceAllString(want, "$1$2"), helloFields.ReplaceAllString(got, "$1$2")
	}
	require.Equal(p.t, want, got, "%q", args)
	return got
}

// TestDifferentialRESP3 switches a connection to RESP3 with HELLO 3 and
// back, on kvserver and on Redis, and requires the same bytes for every
// reply whose type RESP3 changes.
func TestDifferentialRESP3(t *testing.T) {
	p := newRawPair(t)
	p.same("FLUSHALL")
	p.same("HELLO")
	p.same("GET", "missing")
	require.Equal(t, "%7\r\n", p.same("HELLO", "3", "SETNAME", "r3")[:4])
	for _, args := range [][]string{
		{"CLIENT", "GETNAME"},
		{"HELLO"},
		{"PING"},
		{"GET", "missing"},
		{"SET", "k", "v"},
		{"GET", "k"},
		{"MGET", "k", "missing"},
		{"SET", "k", "w", "GET"},
		{"SET", "k", "w", "NX"},
		{"SET", "n", "w", "XX", "GET"},
		{"GETEX", "missing"},
		{"GETDEL", "missing"},
		{"TTL", "k"},
		{"KEYS", "*"},
		{"SCAN", "0"},
		{"CLIENT", "SETNAME", "bad name"},
		{"COMMAND", "INFO", "get", "set", "expire", "nosuch"},
		{"COMMAND", "DOCS", "get", "getex", "hello", "nosuch"},
		{"HELLO", "3", "AUTH", "default", "any"},
		{"HELLO", "3", "AUTH", "bob", "pw"},
		{"HELLO", "4"},
		{"NOSUCH", "x"},
		{"HELLO", "2"},
		{"GET", "missing"},
		{"CLIENT", "GETNAME"},
		{"HELLO", "3"},
		{"FLUSHALL"},
	} {
		p.same(args...)
	}
	// INFO is a verbatim string in RESP3, a bulk string in RESP2.
	info := p.kv.do("INFO", "keyspace")
	require.True(t, strings.HasPrefix(info, "=") && strings.Contains(info, "\r\ntxt:# Keyspace"), "%q", info)
	p.same("HELLO", "2")
	require.True(t, strings.HasPrefix(p.kv.do("INFO", "keyspace"), "$"))
}

// TestDifferentialTransactions runs MULTI, EXEC, DISCARD, WATCH and
// UNWATCH on kvserver and on Redis, with a second connection that writes
// watched keys, and requires the same replies byte for byte.
func TestDifferentialTransactions(t *testing.T) {
	p := newRawPair(t)
	q := p.other()
	script := func(steps ...[]string) {
		t.Helper()
		for _, s := range steps {
			if s[0] == "q" {
				q.same(s[1:]...)
			} else {
				p.same(s...)
			}
		}
	}
	cmd := func(args ...string) []string { return args }
	other := func(args ...string) []string { return append([]string{"q"}, args...) }
	wait := func(d time.Duration) { time.Sleep(d) }

	p.same("FLUSHALL")
	// Queued, then run as one step.
	script(cmd("MULTI"), cmd("SET", "a", "1"), cmd("INCR", "a"), cmd("GET", "a"), cmd("EXEC"))
	script(cmd("EXEC"), cmd("DISCARD"), cmd("MULTI"), cmd("EXEC"))
	script(cmd("MULTI"), cmd("MULTI"), cmd("SET", "a", "2"), cmd("EXEC"), cmd("GET", "a"))
	// A command that cannot be queued aborts the transaction: nothing runs.
	script(cmd("MULTI"), cmd("SET", "a", "3"), cmd("NOSUCH", "x"), cmd("GET", "a"), cmd("EXEC"), cmd("GET", "a"))
	script(cmd("MULTI"), cmd("SET", "a", "3"), cmd("SET", "a"), cmd("EXEC"), cmd("GET", "a"))
	script(cmd("MULTI"), cmd("SET", "a", "3"), cmd("CLIENT", "NOSUCH"), cmd("EXEC"), cmd("GET", "a"))
	script(cmd("MULTI"), cmd("SET", "a", "3"), cmd("EXEC", "x"), cmd("EXEC"), cmd("GET", "a"))
	script(cmd("MULTI"), cmd("SET", "a", "3"), cmd("WATCH"), cmd("EXEC"), cmd("GET", "a"))
	// An error met when a queued command runs is its reply; the rest run.
	script(cmd("MULTI"), cmd("SET", "a", "5", "NX", "XX"), cmd("INCR", "a"), cmd("SET", "s", "abc"),
		cmd("INCR", "s"), cmd("EXPIRE", "s", "x"), cmd("SET", "s2", "x"), cmd("EXEC"), cmd("MGET", "a", "s", "s2"))
	// Nothing of a transaction is visible before EXEC, nor after DISCARD.
	script(cmd("MULTI"), cmd("SET", "hidden", "1"), other("GET", "hidden"), cmd("DISCARD"), cmd("GET", "hidden"),
		cmd("DISCARD"), cmd("EXEC"))
	// WATCH: a write by anyone aborts EXEC; a command that changes
	// nothing does not.
	script(cmd("WATCH", "a"), other("SET", "a", "10"), cmd("MULTI"), cmd("SET", "a", "11"), cmd("EXEC"), cmd("GET", "a"))
	script(cmd("WATCH", "a"), other("SET", "a", "10", "NX"), other("DEL", "missing"), other("EXPIRE", "missing", "10"),
		other("GET", "a"), cmd("MULTI"), cmd("INCR", "a"), cmd("EXEC"))
	script(cmd("WATCH", "a"), cmd("MULTI"), cmd("WATCH", "b"), cmd("INCR", "a"), cmd("EXEC"))
	script(cmd("WATCH", "a"), cmd("UNWATCH"), other("SET", "a", "1"), cmd("MULTI"), cmd("GET", "a"), cmd("EXEC"))
	script(cmd("WATCH", "a", "a", "b"), other("EXPIRE", "a", "100"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("PERSIST", "a"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("PERSIST", "a"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("INCRBYFLOAT", "a", "1.5"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("DEL", "a"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("MSET", "x", "1", "a", "2"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("GETDEL", "a"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("SETEX", "a", "100", "v"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("GETEX", "a", "PERSIST"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("GETEX", "a", "PERSIST"), other("GET", "a"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	// The client's own writes count too.
	script(cmd("WATCH", "a"), cmd("SET", "a", "own"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	// DISCARD forgets the watched keys.
	script(cmd("WATCH", "a"), cmd("MULTI"), cmd("DISCARD"), other("SET", "a", "1"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	// A key watched in another database is another key.
	script(cmd("SELECT", "1"), cmd("WATCH", "a"), other("SET", "a", "db0"), cmd("MULTI"), cmd("GET", "a"), cmd("EXEC"),
		cmd("MULTI"), cmd("SELECT", "0"), cmd("SET", "x", "from-exec"), cmd("SELECT", "1"), cmd("EXEC"), cmd("GET", "x"), cmd("SELECT", "0"), cmd("GET", "x"))
	// FLUSHDB changes a watched key that exists, not one that does not.
	script(cmd("WATCH", "a"), other("FLUSHDB"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("WATCH", "a"), other("FLUSHALL"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	// Expiry: a watched key that expires before EXEC has changed (Redis
	// 7); one already expired at WATCH has not.
	script(cmd("SET", "e", "v", "PX", "100"), cmd("WATCH", "e"))
	wait(200 * time.Millisecond)
	script(cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("DEBUG", "SET-ACTIVE-EXPIRE", "0"), cmd("SET", "e", "v", "PX", "50"))
	wait(100 * time.Millisecond)
	script(cmd("WATCH", "e"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("SET", "e", "v", "PX", "50"))
	wait(100 * time.Millisecond)
	script(cmd("WATCH", "e"), other("GET", "e"), cmd("MULTI"), cmd("PING"), cmd("EXEC"))
	script(cmd("DEBUG", "SET-ACTIVE-EXPIRE", "1"))
	// RESP3's null for an aborted EXEC.
	script(cmd("HELLO", "3"), cmd("WATCH", "a"), other("SET", "a", "1"), cmd("MULTI"), cmd("GET", "a"), cmd("EXEC"),
		cmd("MULTI"), cmd("GET", "a"), cmd("GET", "missing"), cmd("EXEC"), cmd("HELLO", "2"))
}

// TestDifferentialKeyMoves compares what needs a server of the test's own:
// keys moved and copied between databases, and RANDOMKEY.
func TestDifferentialKeyMoves(t *testing.T) {
	p := newRawPair(t)
	for _, args := range [][]string{
		{"FLUSHALL"},
		{"RANDOMKEY"},
		{"SET", "k", "v", "EX", "1000"},
		{"RANDOMKEY"},
		{"COPY", "k", "k", "DB", "3"},
		{"COPY", "k", "k", "DB", "3"},
		{"COPY", "k", "k", "db", "0"},
		{"SET", "k2", "w"},
		{"COPY", "k2", "k", "DB", "3", "REPLACE"},
		{"MOVE", "k", "1"},
		{"MOVE", "k", "1"},
		{"MOVE", "k2", "1"},
		{"SELECT", "1"},
		{"MGET", "k", "k2"},
		{"TTL", "k"},
		{"MOVE", "k", "1"},
		{"SELECT", "3"},
		{"GET", "k"},
		{"TTL", "k"},
		{"RANDOMKEY"},
		{"SELECT", "0"},
		{"DBSIZE"},
		{"RANDOMKEY"},
		{"FLUSHALL"},
	} {
		p.same(args...)
	}
}

// TestDifferentialConfig compares CONFIG GET and CONFIG SET of the
// parameters kvserver has, and its answers to unknown ones, with Redis's.
func TestDifferentialConfig(t *testing.T) {
	p := newRawPair(t)
	for _, proto := range []string{"2", "3"} {
		p.same("HELLO", proto)
		for _, args := range [][]string{
			{"CONFIG", "GET", "save"},
			{"CONFIG", "GET", "appendonly"},
			{"CONFIG", "GET", "databases"},
			{"CONFIG", "GET", "maxmemory"},
			{"CONFIG", "GET", "proto-max-bulk-len"},
			{"CONFIG", "GET", "protected-mode"},
			{"CONFIG", "GET", "no-such-parameter"},
			{"CONFIG", "GET", "no-such-*"},
			{"CONFIG", "GET", "NOTIFY-keyspace-events"},
			{"CONFIG", "GET"},
			{"CONFIG", "SET", "hz", "20"},
			{"CONFIG", "GET", "hz"},
			{"CONFIG", "SET", "hz", "0"},
			{"CONFIG", "GET", "hz"},
			{"CONFIG", "SET", "hz", "100000"},
			{"CONFIG", "GET", "hz"},
			{"CONFIG", "SET", "hz", "-1"},
			{"CONFIG", "SET", "hz", "ten"},
			{"CONFIG", "SET", "hz", "10"},
			{"CONFIG", "SET", "maxclients", "500"},
			{"CONFIG", "GET", "maxclients"},
			{"CONFIG", "SET", "maxclients", "0"},
			{"CONFIG", "SET", "maxclients", "10000"},
			{"CONFIG", "SET", "databases", "4"},
			{"CONFIG", "SET", "no-such-parameter", "1"},
			{"CONFIG", "SET", "hz", "10", "notify-keyspace-events", "Q"},
			{"CONFIG", "GET", "hz"},
			{"CONFIG", "SET", "hz", "11", "HZ", "12"},
			{"CONFIG", "SET", "hz", "12", "notify-keyspace-events", "Ex"},
			{"CONFIG", "GET", "hz"},
			{"CONFIG", "GET", "notify-keyspace-events"},
			{"CONFIG", "SET", "notify-keyspace-events", ""},
			{"CONFIG", "SET", "hz"},
			{"CONFIG", "SET", "hz", "10", "maxclients"},
			{"CONFIG", "NOPE"},
		} {
			p.same(args...)
		}
	}
	// CONFIG GET * lists every parameter kvserver has, and Redis has each
	// with the same name.
	all := p.kv.do("CONFIG", "GET", "*")
	for _, param := range parameters {
		require.Contains(t, all, "\r\n"+param.name+"\r\n")
		require.NotEqual(t, "%0\r\n", p.real.do("CONFIG", "GET", param.name), param.name)
	}
}
