package main

import (
	"context"
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
		done <- run(ctx, ln, Config{Expiry: expiry.Redis7Options()}, slog.New(slog.DiscardHandler))
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
