package redisrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replyError is an error reply of the server, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestRefusedAndBroken(t *testing.T) {
	for _, tc := range []struct {
		err             error
		refused, broken bool
	}{
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true, false},
		{fmt.Errorf("wrapped: %w", replyError("CLUSTERDOWN The cluster is down")), true, false},
		{replyError("ASK 3999 127.0.0.1:6381"), true, false},
		{replyError("MOVED 3999 127.0.0.1:6381"), true, false},
		{replyError("LOADING Redis is loading the dataset in memory"), true, false},
		{replyError("READONLY You can't write against a read only replica."), true, false},
		{replyError("ERR Error running script"), false, false},
		{replyError("NOSCRIPT No matching script"), false, false},
		{io.ErrUnexpectedEOF, false, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false, true},
		{context.Canceled, false, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false, false},
		{redis.Nil, false, false},
		{nil, false, false},
	} {
		if got := Refused(tc.err); got != tc.refused {
			t.Errorf("Refused(%v) = %v, want %v", tc.err, got, tc.refused)
		}
		if got := Broken(tc.err); got != tc.broken {
			t.Errorf("Broken(%v) = %v, want %v", tc.err, got, tc.broken)
		}
	}
}

// Do sends a call again while it is refused, and never one that may have
// run.
func TestDo(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()

	calls := 0
	v, err := Do(ctx, c, func() (int, error) {
		calls++
		if calls < 4 {
			return 0, replyError("TRYAGAIN Multiple keys request during rehashing of slot")
		}
		return 7, nil
	})
	if v != 7 || err != nil || calls != 4 {
		t.Errorf("refused three times: Do = %d, %v after %d calls; want 7, nil after 4", v, err, calls)
	}

	for _, e := range []error{io.ErrUnexpectedEOF, replyError("ERR Error running script")} {
		calls = 0
		_, err = Do(ctx, c, func() (int, error) { calls++; return 0, e })
		if !errors.Is(err, e) || calls != 1 {
			t.Errorf("%v: Do = %v after %d calls; want it after 1", e, err, calls)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	_, err = Do(cctx, c, func() (int, error) {
		calls++
		if calls == 2 {
			cancel()
		}
		return 0, replyError("CLUSTERDOWN The cluster is down")
	})
	if !Refused(err) || calls != 2 {
		t.Errorf("cancelled while refused: Do = %v after %d calls; want the refusal after 2", err, calls)
	}
}

func TestReturned(t *testing.T) {
	var r Returned
	if got := r.Take(); len(got) != 0 {
		t.Fatalf("empty Take = %v", got)
	}
	for i := range maxReturned + 10 {
		r.Add(fmt.Sprint(i))
	}
	got := r.Take()
	if len(got) != ReceiptsPerCall || got[len(got)-1] != fmt.Sprint(maxReturned+9) {
		t.Errorf("Take = %d nonces ending in %s; want %d ending in the newest", len(got), got[len(got)-1], ReceiptsPerCall)
	}
	n := ReceiptsPerCall
	for len(r.Take()) > 0 {
		n += ReceiptsPerCall
	}
	if n < maxReturned || n > maxReturned+ReceiptsPerCall {
		t.Errorf("about %d nonces kept, want %d", n, maxReturned)
	}
}

func TestWaitOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 2e9})
	defer c.Close()
	w, err := WaitOptions(c, 1, 0, 5e8)
	if err != nil || w != (Wait{Replicas: 1, Timeout: 5e8}) {
		t.Errorf("defaults: %v, %v", w, err)
	}
	w, err = WaitOptions(c, 0, 0, 5e8)
	if err != nil || w != (Wait{}) {
		t.Errorf("no replicas: %v, %v", w, err)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		c        redis.UniversalClient
		replicas int
		timeout  int64
		want     string
	}{
		{c, -1, 0, "WaitReplicas (-1) must not be negative"},
		{c, 1, -1e9, "WaitTimeout (-1s) must not be negative"},
		{c, 1, 2e9, "WaitTimeout (2s) must be below the client's ReadTimeout (2s)"},
		{ring, 1, 0, "WaitReplicas (1) needs a *redis.Client or *redis.ClusterClient, not *redis.Ring"},
	} {
		_, err := WaitOptions(tc.c, tc.replicas, time.Duration(tc.timeout), 5e8)
		if err == nil || err.Error() != tc.want {
			t.Errorf("WaitOptions(%d, %d) = %v, want %q", tc.replicas, tc.timeout, err, tc.want)
		}
	}
}
