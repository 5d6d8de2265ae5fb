package main

import (
	"regexp"
	"strings"
	"testing"

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
// it is its own) and connects to each.
func newRawPair(t *testing.T) *rawPair {
	rs := redistest.StartRedis(t, redistest.RedisServerOptions{})
	_, addr := startServer(t, Config{})
	p := &rawPair{t: t, kvAddr: addr, rAddr: rs.Addr}
	p.kv, p.real = dialRaw(t, addr), dialRaw(t, rs.Addr)
	return p
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
