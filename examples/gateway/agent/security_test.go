package agent_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
)

// An agent with a token refuses every call that does not carry it (none,
// another, a prefix of it) with Unauthenticated, and does nothing for it:
// no worker is created, listed or deleted. A client with the token is
// served.
func TestGRPCToken(t *testing.T) {
	const token = "agent-t0ken-of-the-tests"
	local := newLocal(t, agent.Options{Label: newLabel(), StopGrace: time.Second}, "fn")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := agent.NewServer(local, token)
	served := make(chan error, 1)
	go func() { served <- agent.Serve(srv, ln) }()
	defer func() {
		srv.GracefulStop()
		assert.NoError(t, <-served)
	}()
	dial := func(token string) *agent.Client {
		cl, err := agent.Dial(ln.Addr().String(), token)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	good := dial(token)
	kept, err := good.Create(ctx, agent.CreateRequest{Function: "fn", Command: []string{"sleep", "300"}})
	require.NoError(t, err)

	for name, cl := range map[string]*agent.Client{
		"no token": dial(""), "another": dial("another"), "a prefix": dial(token[:len(token)-1]), "longer": dial(token + "x"),
	} {
		_, err := cl.Create(ctx, agent.CreateRequest{Function: "fn", Command: []string{"sleep", "300"}})
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "%s: Create: %v", name, err)
		_, err = cl.List(ctx, agent.ListRequest{Function: "fn"})
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "%s: List: %v", name, err)
		err = cl.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: kept.ID})
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "%s: Delete: %v", name, err)
	}
	ws, err := local.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.Equal(t, []string{kept.ID}, ids(ws), "no refused call created or deleted a worker")

	ws, err = good.List(ctx, agent.ListRequest{Function: "fn"})
	require.NoError(t, err)
	assert.Equal(t, []string{kept.ID}, ids(ws))
	require.NoError(t, good.Delete(ctx, agent.DeleteRequest{Function: "fn", ID: kept.ID}))
}
