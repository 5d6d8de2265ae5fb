package main

// The design's behaviours, each on real worker processes through the AWS
// SDK: FIFO waits at capacity, eviction on timeout, reconciliation with
// the orphan grace period, and the drain on SIGTERM.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
)

// seedTemplate has two functions of capacity 1 on the slow demo function:
// queue (Timeout 10) and limited (Timeout 1).
const seedTemplate = `Resources:
  Queue:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: queue
      CodeUri: {{functions}}/slow
      Timeout: 10
      ReservedConcurrentExecutions: 1
  Limited:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: limited
      CodeUri: {{functions}}/slow
      Timeout: 1
      ReservedConcurrentExecutions: 1
`

// At capacity, invocations wait and are served in the order they arrived.
func TestFIFOAtCapacity(t *testing.T) {
	g := startGateway(t, label(t), nil, "-template", writeTemplate(t, "", seedTemplate))
	c := sdk(g.addr)
	waiting := func() float64 { return gwtest.Metric(t, g.metrics(t), `gateway_pool_waiting{function="queue"}`) }

	var wg sync.WaitGroup
	wg.Go(func() { invoke(t, c, "queue", `{"ms":1000}`) }) // holds the only worker
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, g.metrics(t), `gateway_pool_in_use{function="queue"}`) == 1
	}, 30*time.Second, 5*time.Millisecond)

	const n = 5
	var mu sync.Mutex
	var served []int
	for i := range n {
		wg.Go(func() {
			out := invoke(t, c, "queue", `{"ms":100}`)
			assert.Nil(t, out.FunctionError, "%s", out.Payload)
			mu.Lock()
			served = append(served, i)
			mu.Unlock()
		})
		// The next caller arrives once this one waits.
		require.Eventually(t, func() bool { return waiting() == float64(i+1) }, 10*time.Second, 2*time.Millisecond)
	}
	wg.Wait()
	// One worker serves them 100 ms apart, so they finish in the order
	// they were served.
	assert.Equal(t, []int{0, 1, 2, 3, 4}, served)
	assert.Equal(t, float64(n), gwtest.Metric(t, g.metrics(t), `gateway_pool_waits_total{function="queue"}`))
	assert.Equal(t, 1.0, gwtest.Metric(t, g.metrics(t), `gateway_pool_created_total{function="queue"}`))
}

// An invocation past the function's Timeout gets Lambda's timeout error,
// and its worker, still busy, is destroyed.
func TestTimeoutDestroysTheWorker(t *testing.T) {
	lbl := label(t)
	g := startGateway(t, lbl, nil, "-template", writeTemplate(t, "", seedTemplate))
	c := sdk(g.addr)
	a := localAgent(t, lbl)

	invoke(t, c, "limited", `{"ms":1}`)
	busy := listed(t, a, "limited")
	require.Len(t, busy, 1)
	start := time.Now()
	out := invoke(t, c, "limited", `{"ms":4000}`)
	took := time.Since(start)
	require.NotNil(t, out.FunctionError)
	assert.Equal(t, "Unhandled", *out.FunctionError)
	assert.JSONEq(t, `{"errorType":"Sandbox.Timedout","errorMessage":"Task timed out after 1.00 seconds"}`, string(out.Payload))
	assert.GreaterOrEqual(t, took, time.Second)
	assert.Less(t, took, 3*time.Second, "answered at the timeout, not when the handler ends")

	require.Eventually(t, func() bool {
		return gwtest.Metric(t, g.metrics(t), `gateway_workers_destroyed_total{function="limited",reason="timeout"}`) == 1
	}, 10*time.Second, 20*time.Millisecond)
	assert.NotContains(t, listed(t, a, "limited"), busy[0])
	out = invoke(t, c, "limited", `{"ms":1}`)
	assert.Nil(t, out.FunctionError, "a new worker serves the next call")
}

// Reconciliation: a worker of the gateway's label that the gateway does not
// know (created behind its back) is spared while younger than
// ORPHAN_GRACE_PERIOD_SECONDS, though the janitor runs every heartbeat
// meanwhile, and deleted once older.
func TestReconcileSparesYoungOrphans(t *testing.T) {
	const grace = 4 * time.Second
	lbl := label(t)
	env := map[string]string{envIdleTimeout: "0.3", envHeartbeat: "0.2", envOrphanGrace: fmt.Sprint(grace.Seconds())}
	g := startGateway(t, lbl, env)
	c := sdk(g.addr)
	a := localAgent(t, lbl)
	ctx := context.Background()

	orphan, err := a.Create(ctx, agent.CreateRequest{Function: "echo", Command: []string{"sleep", "300"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Delete(ctx, agent.DeleteRequest{Function: "echo", ID: orphan.ID}) })

	// The gateway's own worker is pruned when idle: the janitor runs, and
	// it spares the orphan.
	invoke(t, c, "echo", `{}`)
	require.Len(t, listed(t, a, "echo"), 2)
	require.Eventually(t, func() bool {
		ws := listed(t, a, "echo")
		return len(ws) == 1 && ws[0].ID == orphan.ID
	}, grace-time.Second, 10*time.Millisecond, "the idle worker pruned, the orphan spared")
	require.Less(t, time.Since(orphan.Created), grace)

	require.Eventually(t, func() bool {
		return !slices.ContainsFunc(listed(t, a, "echo"), func(w agent.Worker) bool { return w.ID == orphan.ID })
	}, grace+10*time.Second, 10*time.Millisecond, "the orphan is deleted once older than the grace period")
	assert.GreaterOrEqual(t, time.Since(orphan.Created), grace)
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, g.metrics(t), `gateway_workers_destroyed_total{function="echo",reason="orphan"}`) == 1
	}, 10*time.Second, 10*time.Millisecond)
	invoke(t, c, "echo", `{}`)
}

// SIGTERM: the invocation in flight finishes, new ones get a clear 503,
// every worker is deleted and the process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	lbl := label(t)
	cmd, addr := startBinary(t, "-label", lbl, "-template", defaultTemplate())
	c := sdk(addr)
	a := localAgent(t, lbl)
	invoke(t, c, "echo", `{}`)

	done := make(chan *lambda.InvokeOutput, 1)
	go func() {
		out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{"ms":1500}`)})
		assert.NoError(t, err)
		done <- out
	}()
	require.Eventually(t, func() bool { return len(listed(t, a, "slow")) == 1 }, 30*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the invocation is on its worker
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))

	var refused bool
	for !refused {
		resp, err := signedPost(t, addr, "hello", []byte("{}"))
		require.NoError(t, err, "the gateway stopped listening before the invocation in flight finished")
		resp.Body.Close()
		refused = resp.StatusCode == http.StatusServiceUnavailable
		if refused {
			assert.Equal(t, "ServiceException", resp.Header.Get("X-Amzn-Errortype"))
		}
	}
	out := <-done
	assert.Nil(t, out.FunctionError)
	assert.Contains(t, string(out.Payload), `"slept_ms":1500`)
	require.NoError(t, cmd.Wait(), "exit status 0")
	for _, fn := range []string{"hello", "echo", "slow"} {
		assert.Empty(t, listed(t, a, fn), fn)
	}
}
