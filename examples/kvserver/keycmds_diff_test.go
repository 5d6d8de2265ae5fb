package main

import (
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// TestDifferentialKeyCommands runs EXPIREAT, LCS, OBJECT, DUMP, RESTORE, SORT,
// SORT_RO and WAIT on kvserver and on a redis-server of the test's own,
// in RESP2 and RESP3, and requires the same bytes.
func TestDifferentialKeyCommands(t *testing.T) {
	p := newRawPair(t)
	p.same("FLUSHALL")
	for _, proto := range []string{"2", "3"} {
		p.same("HELLO", proto)
		for _, args := range [][]string{
			{"SET", "a", "ohmytext"},
			{"SET", "b", "mynewtext"},
			// The instant of Go's zero time.Time, which the keyspace reads as
			// "no deadline": a deadline in the past all the same.
			{"SET", "z", "v"},
			{"PEXPIREAT", "z", "-62135596800000"},
			{"EXISTS", "z"},
			{"SET", "z", "v"},
			{"EXPIREAT", "z", "-62135596800"},
			{"EXISTS", "z"},
			{"LCS", "a", "b"},
			{"LCS", "a", "b", "LEN"},
			{"LCS", "a", "b", "IDX"},
			{"LCS", "a", "b", "IDX", "MINMATCHLEN", "3", "WITHMATCHLEN"},
			{"LCS", "a", "b", "IDX", "MINMATCHLEN", "-1"},
			{"LCS", "a", "missing", "IDX", "WITHMATCHLEN"},
			{"LCS", "a", "b", "LEN", "IDX"},
			{"LCS", "a", "b", "MINMATCHLEN", "1.5"},
			{"SET", "i", "9999"},
			{"OBJECT", "ENCODING", "i"},
			{"OBJECT", "REFCOUNT", "i"},
			{"SET", "i", "10000"},
			{"OBJECT", "REFCOUNT", "i"},
			{"OBJECT", "IDLETIME", "i"},
			{"SET", "i", "99999999999999999999"},
			{"OBJECT", "ENCODING", "i"},
			{"OBJECT", "FREQ", "i"},
			{"OBJECT", "IDLETIME", "missing"},
			{"OBJECT", "HELP"},
			{"OBJECT", "HELP", "x"},
			{"DUMP", "a"},
			{"DUMP", "i"},
			{"DUMP", "missing"},
			{"RESTORE", "c", "0", string(dumpPayload("x"))},
			{"RESTORE", "c", "0", string(dumpPayload("x"))},
			{"RESTORE", "c", "5000", string(dumpPayload(strings.Repeat("xyz", 30))), "REPLACE", "REPLACE"},
			{"GET", "c"},
			{"RESTORE", "c", "1", string(dumpPayload("y")), "REPLACE", "ABSTTL"},
			{"EXISTS", "c"},
			{"RESTORE", "c", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10), string(dumpPayload("y")), "ABSTTL"},
			{"PEXPIRETIME", "c"},
			{"RESTORE", "d", "0", string(dumpPayload("y")), "IDLETIME"},
			{"RESTORE", "d", "0", string(dumpPayload("y")), "IDLETIME", "-1"},
			{"RESTORE", "d", "0", string(dumpPayload("y")), "FREQ", "1", "IDLETIME", "1"},
			{"RESTORE", "d", "0", string(dumpPayload("y")), "FREQ", "255"},
			{"RESTORE", "e", "x", "bad"},
			{"RESTORE", "e", "0", string(dumpPayload("y")[:5])},
			{"RESTORE", "e", "0", string(dumpPayload("y")[:3]) + "\x0b\x00" + string(dumpPayload("y")[5:])},
			{"RESTORE", "e", "0", "\x00\x03abc\n\x00" + strings.Repeat("\x00", 8)},
			{"RESTORE", "e"},
			{"SORT", "a"},
			{"SORT", "a", "NOPE"},
			{"SORT", "missing", "LIMIT", "1", "x"},
			{"SORT", "missing", "BY", "nosort", "GET", "#"},
			{"SORT", "missing", "STORE", "b"},
			{"EXISTS", "b"},
			{"SORT_RO", "missing", "ALPHA"},
			{"SORT_RO", "a"},
			{"SORT_RO", "a", "STORE", "b"},
			{"WAIT", "0", "0"},
			{"WAIT", "0", "x"},
			{"WAIT", "1", "20"},
			{"MULTI"},
			{"WAIT", "5", "0"},
			{"EXEC"},
			{"MIGRATE", "127.0.0.1", "1", "a", "0", "100", "KEYS", "a"},
			{"MIGRATE", "127.0.0.1", "1", "", "0", "100", "AUTH"},
			{"MIGRATE", "127.0.0.1", "1", "", "0", "100", "AUTH2", "u"},
			{"MIGRATE", "127.0.0.1", "1", "", "0", "100", "NOPE"},
			{"MIGRATE", "127.0.0.1", "1", "", "x", "100"},
			{"MIGRATE", "127.0.0.1", "1", "", "0", "x"},
			{"MIGRATE", "127.0.0.1", "1", "missing", "0", "100"},
			{"MIGRATE", "127.0.0.1", "1", "", "0", "100", "KEYS", "missing", "missing2"},
			{"COMMAND", "INFO", "lcs", "dump", "restore", "migrate", "sort", "sort_ro", "wait"},
			{"COMMAND", "DOCS", "lcs", "dump", "restore", "migrate", "sort", "sort_ro", "wait"},
			{"FLUSHALL"},
		} {
			p.same(args...)
		}
		// OBJECT's subcommands come in the order of Redis's hash table.
		require.Equal(t, sortedLines(p.real.do("COMMAND", "INFO", "object")), sortedLines(p.kv.do("COMMAND", "INFO", "object")))
	}
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close())
	p.same("SET", "a", "v")
	p.same("MIGRATE", "127.0.0.1", port, "a", "0", "200")
	p.same("GET", "a")
}

func sortedLines(reply string) []string {
	lines := strings.Split(reply, "\r\n")
	slices.Sort(lines)
	return lines
}

// TestDumpRestoreAcross moves values by DUMP and RESTORE from Redis to
// kvserver and from kvserver to Redis: integers, short and long strings,
// compressible and random bytes. Each payload is the same bytes on both
// servers, and restores on the other to the same value and deadline.
func TestDumpRestoreAcross(t *testing.T) {
	p := newRawPair(t)
	p.same("FLUSHALL")
	r := rand.New(rand.NewPCG(7, 8))
	values := []string{"0", "-1", "127", "-128", "32767", "-32768", "2147483647", "-2147483648", "2147483648",
		"9223372036854775807", "007", "", "x", strings.Repeat("a", 21), strings.Repeat("ab", 1000), strings.Repeat("0123456789", 2000)}
	for range 200 {
		b := make([]byte, r.IntN(600))
		for i := range b {
			if i > 4 && r.IntN(2) == 0 {
				b[i] = b[i-1-r.IntN(4)]
			} else {
				b[i] = byte(r.IntN(256))
			}
		}
		values = append(values, string(b))
	}
	for i, v := range values {
		p.same("SET", "v", v)
		payload := p.same("DUMP", "v")
		body := payload[strings.Index(payload, "\r\n")+2 : len(payload)-2]
		key := "k" + strconv.Itoa(i)
		require.Equal(t, "+OK\r\n", p.kv.do("RESTORE", key, "100000", body), "kvserver restores Redis's payload of %q", v)
		require.Equal(t, "+OK\r\n", p.real.do("RESTORE", key, "100000", body), "Redis restores kvserver's payload of %q", v)
		p.same("GET", key)
		require.InDelta(t, 100000, mustInt(t, p.kv.do("PTTL", key)), 1000)
	}
	// A payload from Redis's own DUMP restores on kvserver, and the other
	// way round, with the payloads made on each side.
	p.real.do("SET", "from-redis", "a value made by Redis, compressible compressible compressible")
	p.kv.do("SET", "from-kv", "a value made by kvserver, compressible compressible compressible")
	fromRedis, fromKV := bulkBody(p.real.do("DUMP", "from-redis")), bulkBody(p.kv.do("DUMP", "from-kv"))
	require.Equal(t, "+OK\r\n", p.kv.do("RESTORE", "from-redis", "0", fromRedis))
	require.Equal(t, "+OK\r\n", p.real.do("RESTORE", "from-kv", "0", fromKV))
	require.Equal(t, p.real.do("GET", "from-redis"), p.kv.do("GET", "from-redis"))
	require.Equal(t, p.kv.do("GET", "from-kv"), p.real.do("GET", "from-kv"))
	p.same("FLUSHALL")
}

func bulkBody(reply string) string { return reply[strings.Index(reply, "\r\n")+2 : len(reply)-2] }

func mustInt(t *testing.T, reply string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSuffix(reply[1:], "\r\n"), 10, 64)
	require.NoError(t, err, "%q", reply)
	return n
}

// TestMigrateAcross migrates keys from kvserver to Redis and from Redis to
// kvserver, with and without COPY, REPLACE, KEYS and a password, and
// compares each source's replies and what each target then holds.
func TestMigrateAcross(t *testing.T) {
	rs := redistest.StartRedis(t, redistest.RedisServerOptions{})
	require.Equal(t, "+OK\r\n", dialRaw(t, rs.Addr).do("CONFIG", "SET", "requirepass", "rpw"))
	_, kvAddr := startServer(t, Config{RequirePass: "kpw"})
	// Sources: a kvserver and a Redis; targets: a Redis and a kvserver
	// that need passwords.
	src := newRawPair(t)
	src.same("FLUSHALL")
	redisTarget, kvTarget := dialRaw(t, rs.Addr), dialRaw(t, kvAddr)
	require.Equal(t, "+OK\r\n", redisTarget.do("AUTH", "rpw"))
	require.Equal(t, "+OK\r\n", kvTarget.do("AUTH", "kpw"))
	rHost, rPort, _ := net.SplitHostPort(rs.Addr)
	kHost, kPort, _ := net.SplitHostPort(kvAddr)
	target := func(c *rawConn) (string, string, string) {
		if c == src.kv {
			return rHost, rPort, "rpw"
		}
		return kHost, kPort, "kpw"
	}
	for _, c := range []*rawConn{src.kv, src.real} {
		to := redisTarget
		if c == src.real {
			to = kvTarget
		}
		host, port, pw := target(c)
		require.Equal(t, "+OK\r\n", to.do("FLUSHALL"))
		c.do("SET", "plain", "v1")
		c.do("SET", "ttl", strings.Repeat("compress me ", 10), "PX", "100000")
		c.do("SET", "n", "12345")
		c.do("SET", "busy", "mine")
		to.do("SET", "busy", "theirs")
		require.Equal(t, "-ERR Target instance replied with error: NOAUTH Authentication required.\r\n",
			c.do("MIGRATE", host, port, "plain", "0", "1000"))
		require.Equal(t, "-ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled.\r\n",
			c.do("MIGRATE", host, port, "plain", "0", "1000", "AUTH", "wrong"))
		require.Equal(t, "$2\r\nv1\r\n", c.do("GET", "plain"), "a failed MIGRATE keeps the key")
		require.Equal(t, "+OK\r\n", c.do("MIGRATE", host, port, "plain", "3", "1000", "AUTH", pw))
		require.Equal(t, "$-1\r\n", c.do("GET", "plain"), "MIGRATE deletes the key it moved")
		require.Equal(t, "+OK\r\n", c.do("MIGRATE", host, port, "", "3", "1000", "COPY", "AUTH2", "default", pw, "KEYS", "ttl", "n", "missing"))
		require.Equal(t, "$5\r\n12345\r\n", c.do("GET", "n"), "COPY keeps the key")
		require.Equal(t, "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n",
			c.do("MIGRATE", host, port, "n", "3", "1000", "AUTH", pw))
		require.Equal(t, "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n",
			c.do("MIGRATE", host, port, "busy", "0", "1000", "AUTH", pw))
		require.Equal(t, "+OK\r\n", c.do("MIGRATE", host, port, "busy", "0", "1000", "REPLACE", "AUTH", pw))
		require.Equal(t, "+NOKEY\r\n", c.do("MIGRATE", host, port, "busy", "0", "1000", "AUTH", pw))
		require.Equal(t, "$4\r\nmine\r\n", to.do("GET", "busy"))
		to.do("SELECT", "3")
		require.Equal(t, "*3\r\n$2\r\nv1\r\n$120\r\n"+strings.Repeat("compress me ", 10)+"\r\n$5\r\n12345\r\n", to.do("MGET", "plain", "ttl", "n"))
		require.InDelta(t, 100000, mustInt(t, to.do("PTTL", "ttl")), 1000, "the deadline moves with the key")
		require.Equal(t, ":-1\r\n", to.do("PTTL", "plain"))
		to.do("SELECT", "0")
	}
	src.same("FLUSHALL")
}
