package main

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// sameN sends a command to both servers and requires the same n replies
// (SUBSCRIBE answers once per channel).
func (p *rawPair) sameN(n int, args ...string) {
	p.t.Helper()
	p.real.send(encodeCommand(args...))
	p.kv.send(encodeCommand(args...))
	for range n {
		require.Equal(p.t, p.real.reply(), p.kv.reply(), "%q", args)
	}
}

// sameSet is same for a reply whose elements come in no set order (Redis
// keeps channels and patterns in hash tables): it compares them sorted.
func (p *rawPair) sameSet(args ...string) {
	p.t.Helper()
	want, got := p.real.do(args...), p.kv.do(args...)
	require.Equal(p.t, sortedElems(want), sortedElems(got), "%q", args)
}

// receivedSet requires the same next n messages on both subscribers, in
// any order.
func (p *rawPair) receivedSet(n int, what string) {
	p.t.Helper()
	var want, got []string
	for range n {
		want, got = append(want, p.real.reply()), append(got, p.kv.reply())
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(p.t, want, got, what)
}

// sortedElems splits a flat array of bulk strings into its header and its
// elements, sorted.
func sortedElems(reply string) []string {
	lines := strings.Split(strings.TrimSuffix(reply, "\r\n"), "\r\n")
	var elems []string
	for i := 1; i+1 < len(lines); i += 2 {
		elems = append(elems, lines[i]+" "+lines[i+1])
	}
	slices.Sort(elems)
	return append([]string{lines[0]}, elems...)
}

// received requires the same next message on both subscribers.
func (p *rawPair) received(what string) {
	p.t.Helper()
	require.Equal(p.t, p.real.reply(), p.kv.reply(), what)
}

// newRawPairExpiring is newRawPair with kvserver's active expiry at
// Redis 7's rate, so that expiry events come as soon as Redis's.
func newRawPairExpiring(t *testing.T) *rawPair {
	rs := redistest.StartRedis(t, redistest.RedisServerOptions{Args: []string{"--enable-debug-command", "yes"}})
	_, addr := startServer(t, Config{Expiry: redis7Options()})
	p := &rawPair{t: t, kvAddr: addr, rAddr: rs.Addr}
	p.kv, p.real = dialRaw(t, addr), dialRaw(t, rs.Addr)
	return p
}

// TestDifferentialPubSub subscribes, publishes and unsubscribes on
// kvserver and on Redis, in RESP2 (subscribe mode) and RESP3 (push
// messages), and requires the same bytes.
func TestDifferentialPubSub(t *testing.T) {
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			sub := newRawPair(t)
			pub := sub.other()
			sub.same("HELLO", proto)
			sub.same("UNSUBSCRIBE")
			sub.same("PUNSUBSCRIBE")
			sub.same("SUBSCRIBE")
			sub.sameN(3, "SUBSCRIBE", "ch1", "ch2", "ch1")
			sub.same("GET", "k")
			sub.same("SET", "k", "v")
			sub.same("PING")
			sub.same("PING", "hi")
			pub.same("PUBLISH", "ch1", "hello")
			sub.received("message on ch1")
			pub.same("PUBLISH", "none", "hello")
			pub.same("PUBLISH", "ch1")
			sub.sameN(2, "PSUBSCRIBE", "ch?", "c[h]*")
			pub.same("PUBLISH", "ch2", "\x00bin\r\nary")
			sub.received("message on ch2")
			sub.receivedSet(2, "a pmessage per pattern")
			pub.sameSet("PUBSUB", "CHANNELS")
			pub.same("PUBSUB", "CHANNELS", "*2")
			pub.same("PUBSUB", "NUMSUB", "ch1", "ch2", "none")
			pub.same("PUBSUB", "NUMSUB")
			pub.same("PUBSUB", "NUMPAT")
			pub.same("PUBSUB", "NUMPAT", "x")
			pub.same("PUBSUB", "NOPE")
			sub.sameN(2, "UNSUBSCRIBE", "ch1", "never")
			sub.same("PUNSUBSCRIBE", "ch?")
			sub.same("PUNSUBSCRIBE")
			sub.same("UNSUBSCRIBE")
			sub.same("UNSUBSCRIBE")
			sub.same("GET", "k")
			sub.same("PING")
			pub.same("PUBSUB", "NUMPAT")
			pub.same("PUBSUB", "CHANNELS")
		})
	}
}

// TestDifferentialKeyspaceEvents sets notify-keyspace-events on kvserver
// and on Redis and requires the same expired events, from passive expiry
// (a key looked up after its deadline) and from active expiry (the expiry
// cycle), in RESP2 and RESP3.
func TestDifferentialKeyspaceEvents(t *testing.T) {
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			sub := newRawPairExpiring(t)
			cmd := sub.other()
			cmd.same("FLUSHALL")
			for _, v := range []string{"", "Ex", "xE", "g$xKE", "KEA", "AKEn", "Ag$lshzxeKEtmdn", "Kx", "KEQ", "E"} {
				cmd.same("CONFIG", "SET", "notify-keyspace-events", v)
				cmd.same("CONFIG", "GET", "notify-keyspace-events")
			}
			cmd.same("CONFIG", "SET", "notify-keyspace-events", "Ex")
			sub.same("HELLO", proto)
			sub.same("PSUBSCRIBE", "__key*__:*")

			// Active expiry: nobody touches the key.
			cmd.same("SET", "active", "v", "PX", "100")
			sub.received("expired by the expiry cycle")

			// Passive expiry: the key is found expired on access.
			cmd.same("DEBUG", "SET-ACTIVE-EXPIRE", "0")
			cmd.same("SET", "passive", "v", "PX", "10")
			time.Sleep(50 * time.Millisecond)
			cmd.same("GET", "passive")
			sub.received("expired on access")
			cmd.same("SET", "past", "v", "PXAT", "1")
			cmd.same("GET", "past")
			sub.received("set in the past")

			// K and E together, in another database.
			cmd.same("CONFIG", "SET", "notify-keyspace-events", "KEx")
			cmd.same("SELECT", "3")
			cmd.same("PSETEX", "k3", "10", "v")
			time.Sleep(50 * time.Millisecond)
			cmd.same("EXISTS", "k3")
			sub.received("keyspace event")
			sub.received("keyevent event")

			// No x: nothing is sent for an expired key.
			cmd.same("CONFIG", "SET", "notify-keyspace-events", "KEl")
			cmd.same("PSETEX", "quiet", "10", "v")
			time.Sleep(50 * time.Millisecond)
			cmd.same("GET", "quiet")
			cmd.same("CONFIG", "SET", "notify-keyspace-events", "Ex")
			cmd.same("PSETEX", "last", "10", "v")
			time.Sleep(50 * time.Millisecond)
			cmd.same("GET", "last")
			sub.received("the next event is the last key's")
			cmd.same("DEBUG", "SET-ACTIVE-EXPIRE", "1")
		})
	}
}

// TestDifferentialKeyEvents runs the string and key commands with
// notify-keyspace-events KEA on kvserver and on Redis and requires the same
// events, in the same order.
func TestDifferentialKeyEvents(t *testing.T) {
	sub := newRawPair(t)
	cmd := sub.other()
	cmd.same("FLUSHALL")
	cmd.same("CONFIG", "SET", "notify-keyspace-events", "KEA")
	sub.same("PSUBSCRIBE", "__key*__:*")
	// Both servers MIGRATE to a third.
	mHost, mPort, _ := net.SplitHostPort(redistest.StartRedis(t, redistest.RedisServerOptions{}).Addr)
	for _, args := range [][]string{
		{"SET", "a", "1"},
		{"SET", "a", "2", "EX", "100"},
		{"SET", "a", "3", "KEEPTTL"},
		{"SET", "a", "4", "NX"},
		{"SET", "a", "5", "XX", "GET"},
		{"SETNX", "b", "1"},
		{"SETNX", "b", "1"},
		{"SETEX", "c", "100", "v"},
		{"PSETEX", "c", "100000", "v"},
		{"GETSET", "c", "w"},
		{"MSET", "d", "1", "e", "2"},
		{"MSETNX", "f", "1", "g", "2"},
		{"MSETNX", "f", "1", "h", "2"},
		{"APPEND", "a", "x"},
		{"SETRANGE", "a", "1", "yz"},
		{"INCR", "b"},
		{"DECR", "b"},
		{"INCRBY", "b", "5"},
		{"DECRBY", "b", "5"},
		{"INCRBYFLOAT", "b", "1.5"},
		{"EXPIRE", "d", "100"},
		{"PEXPIRE", "d", "200000", "GT"},
		{"EXPIREAT", "d", "1", "NX"},
		{"PERSIST", "d"},
		{"PERSIST", "d"},
		{"EXPIRE", "d", "-1"},
		{"GETEX", "e", "EX", "100"},
		{"GETEX", "e", "PERSIST"},
		{"GETEX", "e", "PXAT", "1"},
		{"GETDEL", "f"},
		{"DEL", "g", "missing", "c"},
		{"UNLINK", "b"},
		{"RENAME", "a", "a2"},
		{"SET", "x", "1"},
		{"RENAME", "a2", "x"},
		{"RENAMENX", "x", "y"},
		{"COPY", "y", "z"},
		{"COPY", "y", "z", "DB", "2", "REPLACE"},
		{"MOVE", "z", "3"},
		{"SET", "past", "v", "PXAT", "1"},
		{"GET", "past"},
		{"SET", "past", "v", "EXAT", "1", "GET"},
		{"EXISTS", "past"}, // Redis sends expired on access; kvserver at once
		{"RESTORE", "r", "0", string(dumpPayload("v"))},
		{"RESTORE", "r", "100000", string(dumpPayload("w")), "REPLACE"},
		{"RESTORE", "r", "1", string(dumpPayload("w")), "REPLACE", "ABSTTL"},
		{"RESTORE", "r2", "1", string(dumpPayload("w")), "ABSTTL"},
		{"SET", "s", "v"},
		{"SORT", "missing", "STORE", "s"},
		{"SORT", "missing", "STORE", "s"},
		{"LCS", "x", "y"},
		{"DUMP", "x"},
		{"OBJECT", "ENCODING", "x"},
		{"SET", "m", "v"},
		{"MIGRATE", mHost, mPort, "m", "0", "1000", "REPLACE"},
		{"MIGRATE", mHost, mPort, "m", "0", "1000", "REPLACE"},
		{"FLUSHDB"},
		{"PUBLISH", "__keyevent@0__:end", "end"},
	} {
		cmd.same(args...)
	}
	end := func(ms []string) bool { return len(ms) > 0 && strings.HasSuffix(ms[len(ms)-1], "end\r\n$3\r\nend\r\n") }
	var want, got []string
	for !end(want) {
		want = append(want, sub.real.reply())
	}
	for !end(got) {
		got = append(got, sub.kv.reply())
	}
	require.Greater(t, len(want), 40)
	require.Equal(t, want, got)
}

// TestExpiredEventGoRedis is what a user of the library subscribes to: a
// go-redis PubSub on kvserver's expired events gets a key's event once its
// 100 ms TTL has passed, with nobody reading the key.
func TestExpiredEventGoRedis(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", proto), func(t *testing.T) { expiredEventGoRedis(t, proto) })
	}
}

func expiredEventGoRedis(t *testing.T, proto int) {
	ctx := testContext(t)
	_, addr := startServer(t, Config{Expiry: redis7Options()})
	c := newClient(t, addr, func(o *redis.Options) { o.Protocol = proto })
	require.NoError(t, c.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err())
	ps := c.Subscribe(ctx, "__keyevent@0__:expired")
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, c.Set(ctx, "job:1", "payload", 100*time.Millisecond).Err())
	select {
	case m := <-ps.Channel():
		require.Equal(t, "__keyevent@0__:expired", m.Channel)
		require.Equal(t, "job:1", m.Payload)
		require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	case <-time.After(2 * time.Second):
		t.Fatal("no expired event")
	}

	// PSubscribe and keyspace events.
	require.NoError(t, c.ConfigSet(ctx, "notify-keyspace-events", "Kx").Err())
	pps := c.PSubscribe(ctx, "__keyspace@0__:job:*")
	t.Cleanup(func() { _ = pps.Close() })
	_, err = pps.Receive(ctx)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, c.Set(ctx, fmt.Sprint("job:", i), "x", 50*time.Millisecond).Err())
	}
	got := map[string]bool{}
	for range 3 {
		m, err := pps.ReceiveMessage(ctx)
		require.NoError(t, err)
		require.Equal(t, "expired", m.Payload)
		got[m.Channel] = true
	}
	require.Len(t, got, 3)
	n, err := c.Publish(ctx, "__keyspace@0__:job:9", "hand-made").Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

// TestPushBetweenReplies publishes while a RESP3 subscriber pipelines
// commands: every message arrives whole, between replies, and none is lost.
func TestPushBetweenReplies(t *testing.T) {
	_, addr := startServer(t, Config{})
	sub, pub := dialRaw(t, addr), dialRaw(t, addr)
	sub.do("HELLO", "3")
	require.Equal(t, ">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n", sub.do("SUBSCRIBE", "c"))
	const n = 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			_, _ = pub.c.Write([]byte(encodeCommand("PUBLISH", "c", strings.Repeat("m", i))))
		}
	}()
	var pipeline strings.Builder
	for range n {
		pipeline.WriteString(encodeCommand("ECHO", strings.Repeat("e", 100)))
	}
	sub.send(pipeline.String())
	echoes, messages := 0, 0
	for echoes < n || messages < n {
		r := sub.reply()
		switch {
		case strings.HasPrefix(r, ">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n"):
			require.Equal(t, fmt.Sprintf(">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$%d\r\n%s\r\n", messages, strings.Repeat("m", messages)), r)
			messages++
		default:
			require.Equal(t, "$100\r\n"+strings.Repeat("e", 100)+"\r\n", r)
			echoes++
		}
	}
	<-done
}

// TestSlowSubscriberDisconnected: a subscriber that reads nothing while
// more than pubsubLimit of messages pile up is disconnected, and the
// publisher is never held up.
func TestSlowSubscriberDisconnected(t *testing.T) {
	ctx := testContext(t)
	_, addr := startServer(t, Config{})
	sub := dialRaw(t, addr)
	sub.do("SUBSCRIBE", "c")
	c := newClient(t, addr)
	msg := strings.Repeat("x", 1<<20)
	start := time.Now()
	for range 2 * pubsubLimit >> 20 {
		require.NoError(t, c.Publish(ctx, "c", msg).Err())
	}
	require.Less(t, time.Since(start), 5*time.Second)
	require.Eventually(t, func() bool {
		n, err := c.PubSubNumSub(ctx, "c").Result()
		return err == nil && n["c"] == 0
	}, 5*time.Second, 10*time.Millisecond, "the subscriber is gone")
}
