package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// clientFields parses a CLIENT LIST or CLIENT INFO line.
func clientFields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

// verbatimBody strips RESP framing from a bulk or verbatim reply.
func verbatimBody(reply string) string {
	_, body, _ := strings.Cut(reply, "\r\n")
	body = strings.TrimSuffix(body, "\r\n")
	return strings.TrimPrefix(body, "txt:")
}

// TestDifferentialClient compares the CLIENT subcommands, MEMORY USAGE,
// FUNCTION FLUSH, COMMAND COUNT and INFO commandstats with Redis's: the
// replies byte for byte where they do not depend on the server (addresses,
// ids, memory), and CLIENT LIST's fields and the values both report alike.
func TestDifferentialClient(t *testing.T) {
	p := newRawPair(t)
	p.same("FLUSHALL")
	for _, args := range [][]string{
		{"CLIENT", "NO-EVICT", "on"},
		{"CLIENT", "NO-EVICT", "off"},
		{"CLIENT", "NO-EVICT", "maybe"},
		{"CLIENT", "REPLY", "maybe"},
		{"CLIENT", "KILL", "ID", "0"},
		{"CLIENT", "KILL", "ID", "999999"},
		{"CLIENT", "KILL", "ADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "KILL", "ID"},
		{"CLIENT", "KILL", "NOPE", "1"},
		{"CLIENT", "LIST", "TYPE", "nope"},
		{"CLIENT", "LIST", "ID", "x"},
		{"CLIENT", "LIST", "TYPE", "master"},
		{"CLIENT", "LIST", "BAD"},
		{"CLIENT", "INFO", "x"},
		{"MEMORY", "USAGE", "missing"},
		{"MEMORY", "USAGE", "missing", "SAMPLES", "5"},
		{"MEMORY", "USAGE", "missing", "SAMPLES"},
		{"MEMORY", "USAGE"},
		{"FUNCTION", "FLUSH"},
		{"FUNCTION", "FLUSH", "ASYNC"},
		{"FUNCTION", "FLUSH", "NOW"},
	} {
		p.same(args...)
	}

	// CLIENT REPLY OFF and SKIP: the commands run, the replies do not
	// come.
	p.real.send(encodeCommand("CLIENT", "REPLY", "OFF") + encodeCommand("SET", "off", "1") +
		encodeCommand("CLIENT", "REPLY", "ON") + encodeCommand("CLIENT", "REPLY", "SKIP") +
		encodeCommand("SET", "skipped", "2") + encodeCommand("GET", "off"))
	p.kv.send(encodeCommand("CLIENT", "REPLY", "OFF") + encodeCommand("SET", "off", "1") +
		encodeCommand("CLIENT", "REPLY", "ON") + encodeCommand("CLIENT", "REPLY", "SKIP") +
		encodeCommand("SET", "skipped", "2") + encodeCommand("GET", "off"))
	require.Equal(t, p.real.reply(), p.kv.reply(), "REPLY ON's OK")
	require.Equal(t, p.real.reply(), p.kv.reply(), "GET after the skipped SET")
	p.same("GET", "skipped")

	// MEMORY USAGE of a key grows with its value and stays within a
	// factor of 1.5 of Redis's.
	p.same("SET", "small", "v")
	p.same("SET", "big", strings.Repeat("x", 10000))
	for _, k := range []string{"small", "big"} {
		want, _ := strconv.Atoi(strings.Trim(p.real.do("MEMORY", "USAGE", k), ":\r\n"))
		got, _ := strconv.Atoi(strings.Trim(p.kv.do("MEMORY", "USAGE", k), ":\r\n"))
		require.InEpsilon(t, want, got, 0.5, "MEMORY USAGE %s: Redis %d, kvserver %d", k, want, got)
	}

	// CLIENT LIST and CLIENT INFO: the same fields, in the same order, and
	// the same values for what the client did.
	p.same("CLIENT", "SETNAME", "lister")
	p.same("SELECT", "2")
	q := p.other()
	q.same("HELLO", "3")
	q.same("SUBSCRIBE", "a")
	for _, args := range [][]string{{"CLIENT", "INFO"}, {"CLIENT", "LIST", "TYPE", "normal"}} {
		want, got := verbatimBody(p.real.do(args...)), verbatimBody(p.kv.do(args...))
		require.Equal(t, strings.Count(want, "\n"), strings.Count(got, "\n"), "%q\n%s\n%s", args, want, got)
		wf, gf := clientFields(want), clientFields(got)
		require.Equal(t, regexp.MustCompile(`=\S*`).ReplaceAllString(want, ""),
			regexp.MustCompile(`=\S*`).ReplaceAllString(got, ""), "%q field names", args)
		for _, k := range []string{"name", "db", "sub", "psub", "ssub", "multi", "flags", "cmd", "user", "resp", "redir"} {
			require.Equal(t, wf[k], gf[k], "%q %s", args, k)
		}
	}
	wantPub := clientFields(verbatimBody(p.real.do("CLIENT", "LIST", "TYPE", "pubsub")))
	gotPub := clientFields(verbatimBody(p.kv.do("CLIENT", "LIST", "TYPE", "pubsub")))
	for _, k := range []string{"flags", "sub", "psub", "cmd", "resp", "db", "multi"} {
		require.Equal(t, wantPub[k], gotPub[k], "pubsub client's %s", k)
	}

	// CLIENT KILL ID and ADDR close the other connection.
	for _, by := range []string{"ID", "ADDR"} {
		victim := p.other()
		victim.same("PING")
		for _, side := range []struct {
			self, other *rawConn
		}{{p.real, victim.real}, {p.kv, victim.kv}} {
			f := clientFields(verbatimBody(side.other.do("CLIENT", "INFO")))
			arg := f["id"]
			if by == "ADDR" {
				arg = f["addr"]
			}
			require.Equal(t, ":1\r\n", side.self.do("CLIENT", "KILL", by, arg))
			side.other.closed()
		}
	}
	p.same("CLIENT", "KILL", "SKIPME", "yes")
}

// TestDifferentialCommandStats runs the same commands on fresh
// connections to kvserver and to Redis and requires the same calls,
// rejected_calls and failed_calls in INFO commandstats.
func TestDifferentialCommandStats(t *testing.T) {
	p := newRawPair(t)
	p.same("SET", "a", "1")
	p.same("SET", "a", "1")
	p.same("GET", "a")
	p.same("INCR", "a")
	p.same("SET", "s", "x")
	p.same("INCR", "s")
	p.same("GET")
	p.same("MULTI")
	p.same("SET", "b", "2")
	p.same("GET", "b")
	p.same("EXEC")
	p.same("CLIENT", "ID", "x")
	p.same("CONFIG", "GET", "save")
	stats := func(c *rawConn) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(verbatimBody(c.do("INFO", "commandstats")), "\r\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok || !strings.HasPrefix(k, "cmdstat_") {
				continue
			}
			m[k] = regexp.MustCompile(`usec=\d+,usec_per_call=[\d.]+,`).ReplaceAllString(v, "")
		}
		return m
	}
	want, got := stats(p.real), stats(p.kv)
	for _, k := range []string{"cmdstat_flushall", "cmdstat_debug", "cmdstat_hello", "cmdstat_ping"} {
		delete(want, k) // the test harness's, on its own connection
	}
	delete(got, "cmdstat_flushall")
	require.Equal(t, want, got)
	info := verbatimBody(p.kv.do("INFO", "commandstats"))
	require.Regexp(t, `cmdstat_set:calls=4,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=0,failed_calls=0`, info)
	require.NotContains(t, verbatimBody(p.kv.do("INFO")), "cmdstat_")
	require.Contains(t, verbatimBody(p.kv.do("INFO", "all")), "cmdstat_")
}

// TestCommandCountAndList checks that COMMAND COUNT and COMMAND LIST name
// exactly the commands kvserver runs, and that each is known to Redis.
func TestCommandCountAndList(t *testing.T) {
	ctx := testContext(t)
	_, addr := startServer(t, Config{})
	c := newClient(t, addr)
	n, err := c.Do(ctx, "COMMAND", "COUNT").Int()
	require.NoError(t, err)
	require.Equal(t, len(commands), n)
	names, err := c.Do(ctx, "COMMAND", "LIST").StringSlice()
	require.NoError(t, err)
	require.Len(t, names, n)
	for _, name := range names {
		err := c.Do(ctx, name).Err()
		if err != nil {
			require.NotContains(t, err.Error(), "unknown command", name)
		}
	}
	require.Contains(t, names, "subscribe")
	require.Contains(t, names, "config")
	require.NotContains(t, names, "lpush")
}
