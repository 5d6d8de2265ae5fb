package probe_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/pool/probe"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestWaitBacksOffUntilReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		start := time.Now()
		f := func(context.Context) error {
			at = append(at, time.Since(start))
			if len(at) < 5 {
				return errors.New("connection refused")
			}
			return nil
		}
		err := probe.Wait(context.Background(), f, probe.Options{Interval: 10 * time.Millisecond, MaxInterval: 40 * time.Millisecond})
		require.NoError(t, err)
		// Pauses 10, 20, 40, 40 ms.
		assert.Equal(t, []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond, 70 * time.Millisecond, 110 * time.Millisecond}, at)
	})
}

func TestWaitTimesOutWithTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("connection refused")
		attempts := 0
		start := time.Now()
		err := probe.Wait(context.Background(), func(context.Context) error { attempts++; return refused },
			probe.Options{Timeout: time.Second})
		require.ErrorIs(t, err, probe.ErrNotReady)
		require.ErrorIs(t, err, refused)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "a probe timeout is not the caller's deadline")
		assert.Equal(t, time.Second, time.Since(start), "Wait returns at its Timeout, not later")
		assert.Contains(t, err.Error(), "Timeout 1s")
		assert.Greater(t, attempts, 3)
	})
}

func TestWaitBoundsASlowAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := probe.Wait(context.Background(), func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			probe.Options{Timeout: 5 * time.Second, AttemptTimeout: time.Second})
		require.ErrorIs(t, err, probe.ErrNotReady)
		assert.LessOrEqual(t, time.Since(start), 5*time.Second+500*time.Millisecond /* the default MaxInterval */)
	})
}

func TestWaitStopsWhenCallerCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(100*time.Millisecond, func() { cancel(stop) })
		err := probe.Wait(ctx, func(context.Context) error { return errors.New("refused") }, probe.Options{})
		require.ErrorIs(t, err, stop)
		assert.NotErrorIs(t, err, probe.ErrNotReady)
	})
}

func TestBadOptions(t *testing.T) {
	f := func(context.Context) error { return nil }
	for name, o := range map[string]probe.Options{
		"Timeout":        {Timeout: -1},
		"AttemptTimeout": {AttemptTimeout: -1},
		"MaxInterval":    {Interval: time.Second, MaxInterval: time.Millisecond},
	} {
		err := probe.Wait(context.Background(), f, o)
		require.ErrorIs(t, err, probe.ErrInvalid, name)
		assert.Contains(t, err.Error(), name)
	}
	require.ErrorIs(t, probe.Wait(context.Background(), nil, probe.Options{}), probe.ErrInvalid)
	require.ErrorIs(t, probe.Once(context.Background(), nil, 0), probe.ErrInvalid)
	require.ErrorIs(t, probe.Once(context.Background(), f, -1), probe.ErrInvalid)
}

func TestTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	require.NoError(t, probe.Once(context.Background(), probe.TCP(addr), time.Second))
	require.NoError(t, ln.Close())
	require.Error(t, probe.Once(context.Background(), probe.TCP(addr), time.Second), "a closed port is not ready")
}

func TestHTTP(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/healthz", http.StatusFound)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	err := probe.Once(context.Background(), probe.HTTP(srv.URL+"/healthz"), time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "503")
	status = http.StatusNoContent
	require.NoError(t, probe.Once(context.Background(), probe.HTTP(srv.URL+"/healthz"), time.Second))
	require.Error(t, probe.Once(context.Background(), probe.HTTP(srv.URL+"/moved"), time.Second), "a redirect is not ready")
	require.Error(t, probe.Once(context.Background(), probe.HTTP("http://127.0.0.1:1/"), time.Second))
}
