package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/gateway/template"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// configuration is what GetFunctionConfiguration answers of fn.
func (e *env) configuration(t *testing.T, fn string) map[string]any {
	t.Helper()
	r := e.request(t, "GET", "/2015-03-31/functions/"+fn+"/configuration", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var c map[string]any
	require.NoError(t, json.Unmarshal(r.body, &c))
	return c
}

// A function is Pending while its build runs, and the gateway serves the
// functions already built meanwhile; a failed build leaves its function
// Failed and the others serving; the held build's end makes its function
// Active, with its warm minimum.
func TestBuildsInBackground(t *testing.T) {
	// ready first: the first function's build runs alone.
	ready, held, broken := function("ready", 3, 1), function("held", 3, 1), function("broken", 3, 1)
	held.Provisioned = 1
	release := make(chan struct{})
	logs := &testenv.Buffer{}
	e := startWith(t, func(c *gateway.Config) {
		c.Commands = nil
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.Build = func(ctx context.Context, f template.Function) ([]string, error) {
			switch f.Name {
			case "held":
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			case "broken":
				return nil, errors.New("function broken: go build: ./main.go:3:2: undefined: x")
			}
			return []string{os.Args[0]}, nil
		}
	}, ready, held, broken)

	require.Eventually(t, func() bool {
		r, _ := e.gw.State("ready")
		b, _ := e.gw.State("broken")
		return r.State == gateway.StateActive && b.State == gateway.StateFailed
	}, 10*time.Second, 5*time.Millisecond)
	r := e.post(t, "ready", []byte(`{"echo":1}`))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Positive(t, pid(t, r), "a built function serves while another builds")

	st, ok := e.gw.State("held")
	require.True(t, ok)
	assert.Equal(t, gateway.FunctionState{State: gateway.StatePending, Reason: "The function is being created.", ReasonCode: "Creating"}, st)
	pending := "The operation cannot be performed at this time. The function is currently in the following state: Pending"
	for _, typ := range []string{"RequestResponse", "Event", "DryRun"} {
		lambdaError(t, e.post(t, "held", []byte(`{}`), "X-Amz-Invocation-Type", typ), http.StatusConflict, "ResourceConflictException", pending)
	}
	lambdaError(t, e.post(t, "held:live", []byte(`{}`)), http.StatusNotFound, "ResourceNotFoundException", "function:held:live")
	c := e.configuration(t, "held")
	assert.Equal(t, "Pending", c["State"])
	assert.Equal(t, "Creating", c["StateReasonCode"])
	assert.Equal(t, "The function is being created.", c["StateReason"])
	assert.NotContains(t, c, "LastUpdateStatus")
	assert.Zero(t, e.gw.Stats()["held"].Size, "no warm worker before the build")

	c = e.configuration(t, "broken")
	assert.Equal(t, "Failed", c["State"])
	assert.Equal(t, "InvalidZipFileException", c["StateReasonCode"])
	assert.Contains(t, c["StateReason"], "undefined: x")
	lambdaError(t, e.post(t, "broken", []byte(`{}`)), http.StatusConflict, "ResourceConflictException",
		"The operation cannot be performed at this time. The function is currently in the following state: Failed")

	c = e.configuration(t, "ready")
	assert.Equal(t, "Active", c["State"])
	assert.Equal(t, "Successful", c["LastUpdateStatus"])
	assert.NotContains(t, c, "StateReasonCode")

	lr := e.request(t, "GET", "/2015-03-31/functions", nil)
	var list struct {
		Functions []struct{ FunctionName, State string }
	}
	require.NoError(t, json.Unmarshal(lr.body, &list), "%s", lr.body)
	states := map[string]string{}
	for _, f := range list.Functions {
		states[f.FunctionName] = f.State
	}
	assert.Equal(t, map[string]string{"ready": "Active", "held": "Pending", "broken": "Failed"}, states)

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, e.gw.Built(short), context.DeadlineExceeded, "a build is still running")
	assert.Regexp(t, `msg=building function=held`, logs.String())
	assert.Regexp(t, `msg=built function=ready took=\d`, logs.String())
	assert.Regexp(t, `level=ERROR msg="build failed" function=broken took=\S+ err="function broken: go build: ./main.go:3:2: undefined: x"`, logs.String())
	assert.NotRegexp(t, `msg=built function=held`, logs.String())

	close(release)
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	require.NoError(t, e.gw.Built(ctx))
	st, _ = e.gw.State("held")
	assert.Equal(t, gateway.StateActive, st.State)
	assert.Regexp(t, `msg=built function=held took=\d`, logs.String())
	require.Eventually(t, func() bool { return e.gw.Stats()["held"].Idle == 1 }, 10*time.Second, 5*time.Millisecond, "the warm minimum, once built")
	r = e.post(t, "held", []byte(`{}`))
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "Active", e.configuration(t, "held")["State"])
}

// Close cancels a build under way and waits for it; its function stays
// Pending.
func TestCloseCancelsBuild(t *testing.T) {
	started := make(chan struct{})
	var canceled atomic.Bool
	e := startWith(t, func(c *gateway.Config) {
		c.Commands = nil
		c.Build = func(ctx context.Context, _ template.Function) ([]string, error) {
			close(started)
			<-ctx.Done()
			canceled.Store(true)
			return nil, ctx.Err()
		}
	}, function("fn", 3, 1))
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.gw.Close(ctx))
	assert.True(t, canceled.Load(), "Close waited for the build to end")
	st, _ := e.gw.State("fn")
	assert.Equal(t, gateway.StatePending, st.State)
	assert.NoError(t, e.gw.Built(ctx), "Built returns once the builds ended")
}

// Apply with commands makes a Pending function Active at once; the
// build of its first configuration, ending later, changes nothing.
func TestApplyWhileBuilding(t *testing.T) {
	release := make(chan struct{})
	fn := function("fn", 3, 1)
	e := startWith(t, func(c *gateway.Config) {
		c.Commands = nil
		c.Build = func(context.Context, template.Function) ([]string, error) {
			<-release
			return nil, errors.New("the first build fails")
		}
	}, fn)
	require.NoError(t, e.gw.Apply([]template.Function{fn}, map[string][]string{"fn": {os.Args[0]}}))
	r := e.post(t, "fn", []byte(`{}`))
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.gw.Built(ctx))
	st, _ := e.gw.State("fn")
	assert.Equal(t, gateway.StateActive, st.State, "the stale build's failure does not replace the reload's command")
}

// noAgent is an agent with no workers.
type noAgent struct{}

func (noAgent) Create(context.Context, agent.CreateRequest) (agent.Worker, error) {
	return agent.Worker{}, errors.New("no agent")
}
func (noAgent) Delete(context.Context, agent.DeleteRequest) error { return nil }
func (noAgent) List(context.Context, agent.ListRequest) ([]agent.Worker, error) {
	return nil, nil
}

// The first build runs alone, then MaxBuilds at a time, each function
// Active as soon as its own build ends, and each logged with how long it
// took.
func TestBuildsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, most atomic.Int64
		logs := &testenv.Buffer{}
		names := []string{"a", "b", "c", "d"}
		var fns []template.Function
		for _, n := range names {
			fns = append(fns, function(n, 3, 1))
		}
		g, err := gateway.New(gateway.Config{
			Agent: noAgent{}, Runtime: runtimeapi.New(), RuntimeAddr: "127.0.0.1:1",
			IdleTimeout: time.Hour, Heartbeat: time.Hour, OrphanGrace: time.Hour, Metrics: gateway.NewMetrics(),
			Credentials: []sigv4.Credentials{creds}, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			MaxBuilds: 2,
			Build: func(context.Context, template.Function) ([]string, error) {
				most.Store(max(most.Load(), running.Add(1)))
				defer running.Add(-1)
				time.Sleep(10 * time.Second)
				return []string{"/bin/true"}, nil
			},
		}, fns)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, g.Start(t.Context()))
		count := func(s gateway.State) int {
			n := 0
			for _, fn := range names {
				if st, _ := g.State(fn); st.State == s {
					n++
				}
			}
			return n
		}
		synctest.Wait()
		assert.Equal(t, 4, count(gateway.StatePending))
		assert.Equal(t, int64(1), running.Load(), "the first alone")
		time.Sleep(15 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, count(gateway.StateActive), "the first, Active at the end of its build")
		st, _ := g.State("a")
		assert.Equal(t, gateway.StateActive, st.State, "the template's first function builds first")
		assert.Equal(t, int64(2), running.Load(), "then two at once")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Equal(t, 3, count(gateway.StateActive), "each Active at the end of its own build")
		require.NoError(t, g.Built(t.Context()))
		assert.Equal(t, 30*time.Second, time.Since(start), "the first alone, then two at a time")
		assert.Equal(t, int64(2), most.Load())
		assert.Equal(t, 4, count(gateway.StateActive))
		for _, n := range names {
			assert.Contains(t, logs.String(), "msg=building function="+n+"\n")
			assert.Contains(t, logs.String(), "msg=built function="+n+" took=10s\n")
		}
		require.NoError(t, g.Close(t.Context()))
	})
}
