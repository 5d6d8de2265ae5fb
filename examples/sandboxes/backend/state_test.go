package backend_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/examples/sandboxes/backend"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// The test binary is also the agent of the sandboxes gc_test.go starts.
func TestMain(m *testing.M) {
	agent.ServeIfAgent()
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	leakcheck.VerifyTestMain(m)
}

// checkAssignments runs the same scenario on an Assignments implementation.
func checkAssignments(t *testing.T, a backend.Assignments) {
	ctx := context.Background()
	sb := sandbox.Sandbox{ID: "sb1", Host: "10.0.1.5", Port: 8080, Created: time.Now().Add(-time.Minute).Round(time.Millisecond)}
	_, ok, err := a.Get(ctx, "c1")
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = a.Begin(ctx, "c1", "r0", time.Minute)
	assert.Error(t, err, "no record: no request")

	created, _, err := a.Create(ctx, backend.Record{Conversation: "c1", Sandbox: sb}, time.Hour)
	require.NoError(t, err)
	assert.True(t, created)
	created, existing, err := a.Create(ctx, backend.Record{Conversation: "c1", Sandbox: sandbox.Sandbox{ID: "sb2"}}, time.Hour)
	require.NoError(t, err)
	assert.False(t, created, "one record per conversation")
	assert.Equal(t, "sb1", existing.Sandbox.ID)

	rec, err := a.Begin(ctx, "c1", "r1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, backend.StatusRunning, rec.Status)
	assert.Equal(t, 1, rec.InFlight)
	assert.Equal(t, sb.Host, rec.Sandbox.Host)
	assert.True(t, sb.Created.Equal(rec.Sandbox.Created))
	_, err = a.Begin(ctx, "c1", "r2", 50*time.Millisecond) // its instance dies: it stops counting
	require.NoError(t, err)
	rec, _, _ = a.Get(ctx, "c1")
	assert.Equal(t, 2, rec.InFlight)
	time.Sleep(100 * time.Millisecond)
	rec, _, _ = a.Get(ctx, "c1")
	assert.Equal(t, 1, rec.InFlight)

	// Draining refuses new requests; a drain of another sandbox changes
	// nothing.
	_, ok, err = a.Drain(ctx, "c1", "other")
	require.NoError(t, err)
	assert.False(t, ok)
	rec, ok, err = a.Drain(ctx, "c1", "sb1")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 1, rec.InFlight)
	_, err = a.Begin(ctx, "c1", "r3", time.Minute)
	assert.Error(t, err)
	require.NoError(t, a.End(ctx, "c1", "r1", time.Hour))
	rec, _, _ = a.Get(ctx, "c1")
	assert.Equal(t, backend.StatusDraining, rec.Status)
	assert.Zero(t, rec.InFlight)
	require.NoError(t, a.Undrain(ctx, "c1", "sb1"))
	rec, _, _ = a.Get(ctx, "c1")
	assert.Equal(t, backend.StatusIdle, rec.Status)

	require.NoError(t, a.Delete(ctx, "c1", "other"))
	_, ok, _ = a.Get(ctx, "c1")
	assert.True(t, ok, "a delete of another sandbox changes nothing")
	require.NoError(t, a.Delete(ctx, "c1", "sb1"))
	_, ok, _ = a.Get(ctx, "c1")
	assert.False(t, ok)

	// Records expire unless a request ends.
	created, _, err = a.Create(ctx, backend.Record{Conversation: "c2", Sandbox: sb}, 100*time.Millisecond)
	require.NoError(t, err)
	require.True(t, created)
	time.Sleep(150 * time.Millisecond)
	_, ok, _ = a.Get(ctx, "c2")
	assert.False(t, ok)

}

func TestMemoryAssignments(t *testing.T) {
	checkAssignments(t, backend.NewMemoryAssignments(nil))
}

func TestRedisAssignments(t *testing.T) {
	r := redistest.OpenRedis(t)
	a := backend.NewRedisAssignments(r.Client, r.Prefix+"ws")
	checkAssignments(t, a)
	assert.Equal(t, r.Prefix+"ws:container:{c9}", a.RecordKey("c9"), "the design's key, the conversation a hash tag")
}
