package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestRunShutsDownOnCancel is main's shutdown path: when the signal context
// ends, run closes the listener and the connections and returns.
func TestRunShutsDownOnCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, ln, Config{Expiry: redis7Options()}, slog.New(slog.DiscardHandler))
	}()
	rc := dialRaw(t, ln.Addr().String())
	rc.send("SET k v\r\n")
	require.Equal(t, "+OK", rc.line())
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	rc.closed()
	_, err = net.Dial("tcp", ln.Addr().String())
	require.Error(t, err, "the listener should be closed")
}

func TestRunRejectsBadOptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	err = run(t.Context(), ln, Config{Expiry: expiry.Options{Threshold: 2}}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "Threshold")
}

// TestBadFlagsAreRefused: a negative limit or a stray argument is an error
// naming what is wrong, never silently the default; the message carries the
// package prefix once.
func TestBadFlagsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-max-clients", "-5"}, "kvserver: MaxClients (-5) is negative"},
		{[]string{"-max-bulk-len", "-1"}, "kvserver: Limits.MaxBulkLen (-1) is negative"},
		{[]string{"-max-args", "-2"}, "kvserver: Limits.MaxArgs (-2) is negative"},
		{[]string{"-sample", "-1"}, "kvserver: expiry: SampleSize (-1) is negative"},
		{[]string{"6380"}, `kvserver: unexpected argument "6380"`},
	} {
		_, cfg, err := parseFlags(tc.args, io.Discard)
		if err == nil {
			var srv *Server
			srv, err = New(cfg)
			if err == nil {
				_ = srv.Close()
			}
		}
		require.EqualError(t, err, tc.want, "%q", tc.args)
	}
	_, _, err := parseFlags([]string{"-h"}, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
	addr, cfg, err := parseFlags([]string{"-addr", ":1", "-redis7", "-sample", "5"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, ":1", addr)
	require.Equal(t, redis7Options().Interval, cfg.Expiry.Interval, "the preset")
	require.Equal(t, 5, cfg.Expiry.SampleSize, "a flag overrides the preset")
}
