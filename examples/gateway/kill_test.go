package main

// The gateway and a separate agent, each a process of its own, killed with
// SIGKILL in the middle of a burst of invocations and started again: what
// a client sees, which invocations run (each reports its run to the test),
// and what is left of the workers: processes, or containers on Docker.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
)

// killTemplate runs the test binary as a function (gwtest) twice: rec
// (capacity 4), which the bursts invoke, and cold, which has no worker
// when the agent is killed.
const killTemplate = `Resources:
  Rec:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: rec
      CodeUri: {{binary}}
      Timeout: 30
      ReservedConcurrentExecutions: 4
      Environment:
        Variables:
          ` + gwtest.Env + `: "1"
  Cold:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: cold
      CodeUri: {{binary}}
      Timeout: 30
      ReservedConcurrentExecutions: 2
      Environment:
        Variables:
          ` + gwtest.Env + `: "1"
`

// killDockerTemplate is killTemplate with the function (gwtest/function)
// as an image.
const killDockerTemplate = `Resources:
  Rec:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: rec
      PackageType: Image
      ImageUri: {{image}}
      Timeout: 30
      ReservedConcurrentExecutions: 4
  Cold:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: cold
      PackageType: Image
      ImageUri: {{image}}
      Timeout: 30
      ReservedConcurrentExecutions: 2
`

// daemon is the built program (gatewayBinary) run as a process of its
// own, its stdout and stderr in one file: the worker processes an agent
// starts inherit them, so they must not be pipes that the test reads.
type daemon struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error // what Wait returned; set before exited is closed
}

// startDaemon runs the program with args and env added to the test's
// environment; it is killed when the test ends if it still runs.
func startDaemon(t *testing.T, env []string, args ...string) *daemon {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close() // the process has its own copy
	d := &daemon{cmd: exec.Command(gatewayBinary(t), args...), log: f.Name(), exited: make(chan struct{})}
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	require.NoError(t, d.cmd.Start())
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}

func (d *daemon) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(d.log)
	require.NoError(t, err)
	return string(b)
}

// waitFor waits for a match of re in the daemon's output, within limit.
func (d *daemon) waitFor(t *testing.T, re *regexp.Regexp, limit time.Duration) []string {
	t.Helper()
	deadline := time.After(limit)
	for {
		if m := re.FindStringSubmatch(d.output(t)); m != nil {
			return m
		}
		select {
		case <-d.exited:
			t.Fatalf("exited (%v) before %q:\n%s", d.err, re, d.output(t))
		case <-deadline:
			t.Fatalf("no %q after %v:\n%s", re, limit, d.output(t))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGKILL))
	<-d.exited
}

// stop sends SIGTERM and requires the process to exit 0 within a minute.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-d.exited:
		require.NoError(t, d.err, "exit status:\n%s", d.output(t))
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGTERM:\n%s", d.output(t))
	}
}

var agentListenRE = regexp.MustCompile(`agent listening on (\S+)`)

// startKillAgent runs the agent subcommand on the unix socket sock, with
// args.
func startKillAgent(t *testing.T, lbl, sock string, args ...string) *daemon {
	t.Helper()
	d := startDaemon(t, nil, append([]string{"agent", "-listen", "unix:" + sock, "-label", lbl, "-log-level", "info"}, args...)...)
	d.waitFor(t, agentListenRE, time.Minute)
	return d
}

// startKillGateway runs the gateway at addr with the agent on sock and
// env, and waits for its "functions built" line; it returns the address it
// listens on.
func startKillGateway(t *testing.T, env []string, lbl, sock, tpl, addr string) (*daemon, string) {
	t.Helper()
	env = append([]string{envAccessKeyID + "=" + testCreds.AccessKeyID, envSecretAccessKey + "=" + testCreds.SecretAccessKey}, env...)
	d := startDaemon(t, env,
		"-addr", addr, "-agent", "unix:"+sock, "-label", lbl, "-template", tpl, "-build-dir", buildDir,
		"-event-retry-delay", "1s", "-log-level", "info")
	addr = d.waitFor(t, listenRE, time.Minute)[1]
	m := d.waitFor(t, builtRE, time.Minute)
	require.Equal(t, "2", m[1], "active functions:\n%s", d.output(t))
	return d, addr
}

// scrape returns the /metrics of the gateway at addr, or "" when it does
// not answer.
func scrape(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// shot is one invocation the test sent, and what its client saw.
type shot struct {
	name  string // its record file's name
	fn    string
	event bool
	reqID string // the x-amzn-RequestId of its answer, if it got one
	out   *lambda.InvokeOutput
	err   error
	done  time.Time
}

// volley is a group of invocations sent at once.
type volley struct {
	shots []*shot
	wg    sync.WaitGroup
}

// records is where the invocations report their runs
// (gwtest.Request.RecordURL), each under its own name, so that a run is
// counted even when its client got no answer: a server on the host's
// loopback, which containers reach too.
type records struct {
	url  string
	mu   sync.Mutex
	n    int
	all  []*shot
	runs map[string][]string // request ids by shot name
}

func newRecords(t *testing.T) *records {
	rs := &records{runs: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rs.mu.Lock()
		rs.runs[strings.TrimPrefix(r.URL.Path, "/")] = append(rs.runs[strings.TrimPrefix(r.URL.Path, "/")], string(id))
		rs.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	rs.url = srv.URL
	return rs
}

// fire sends rr RequestResponse and events Event invocations of fn,
// each sleeping ms once it has recorded its run, through c at once, and
// returns without waiting for them.
func (rs *records) fire(t *testing.T, c *lambda.Client, phase, fn string, rr, events, ms int) *volley {
	t.Helper()
	v := &volley{}
	for i := range rr + events {
		rs.mu.Lock()
		rs.n++
		s := &shot{name: fmt.Sprintf("%s-%s-%03d", phase, fn, rs.n), fn: fn, event: i >= rr}
		rs.all = append(rs.all, s)
		rs.mu.Unlock()
		v.shots = append(v.shots, s)
	}
	for _, s := range v.shots {
		payload, err := json.Marshal(gwtest.Request{RecordURL: rs.url + "/" + s.name, SleepMS: ms})
		require.NoError(t, err)
		in := &lambda.InvokeInput{FunctionName: aws.String(fn), Payload: payload}
		if s.event {
			in.InvocationType = types.InvocationTypeEvent
		}
		v.wg.Go(func() {
			// Bounded, so that a hang fails the test rather than
			// stalling it; none should come near.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s.out, s.err = c.Invoke(ctx, in)
			s.done = time.Now()
			if s.out != nil {
				s.reqID, _ = awsmiddleware.GetRequestIDMetadata(s.out.ResultMetadata)
			}
			var re *awshttp.ResponseError
			if errors.As(s.err, &re) {
				s.reqID = re.ServiceRequestID()
			}
		})
	}
	return v
}

// wait waits for every invocation of v to be answered, or to fail.
func (v *volley) wait() { v.wg.Wait() }

// ran returns the request ids of the runs of s.
func (rs *records) ran(s *shot) []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.runs[s.name])
}

// ok says whether s was answered as a client wants: 200 with the
// function's result, or 202 for an event.
func (s *shot) ok() bool {
	if s.err != nil || s.out == nil || s.out.FunctionError != nil {
		return false
	}
	return s.event && s.out.StatusCode == http.StatusAccepted || !s.event && s.out.StatusCode == http.StatusOK
}

// requireServed requires every invocation of v answered as a client wants,
// and each to run exactly once under its request id, within limit (an
// event runs after its 202).
func (rs *records) requireServed(t *testing.T, v *volley, limit time.Duration) {
	t.Helper()
	v.wait()
	for _, s := range v.shots {
		require.True(t, s.ok(), "%s: %v %+v", s.name, s.err, s.out)
		require.NotEmpty(t, s.reqID, s.name)
	}
	require.Eventually(t, func() bool {
		for _, s := range v.shots {
			if len(rs.ran(s)) == 0 {
				return false
			}
		}
		return true
	}, limit, 20*time.Millisecond, "every invocation runs")
	for _, s := range v.shots {
		assert.Equal(t, []string{s.reqID}, rs.ran(s), "%s ran once, under its request id", s.name)
	}
}

// waitBusy waits until the gateway at addr runs 4 invocations of rec
// (its capacity) and holds the 8 events of a burst: in the middle of it.
func waitBusy(t *testing.T, gw *daemon, addr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m := scrape(addr)
		if gwtest.Metric(t, m, `gateway_pool_in_use{function="rec"}`) == 4 && gwtest.Metric(t, m, "gateway_events_queued") == 8 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never ran 4 invocations of rec and held 8 events at once:\n%s\n%s", m, gw.output(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requireCut checks the invocations of v, sent to a gateway killed at
// killed while they ran or waited, and returns how many calls failed and
// how many accepted events never ran. Every event was accepted (202), and
// ran at most once; a call was answered before the kill and ran once, or
// failed with a connection error at once (the SDK's RequestSendError),
// and ran at most once: on a worker before the kill, or not at all.
func (rs *records) requireCut(t *testing.T, v *volley, killed time.Time) (failed, lost int) {
	t.Helper()
	v.wait()
	for _, s := range v.shots {
		ran := rs.ran(s)
		switch {
		case s.event:
			require.True(t, s.ok(), "%s was accepted before the kill: %v", s.name, s.err)
			assert.LessOrEqual(t, len(ran), 1, s.name)
			if len(ran) == 0 {
				lost++
			}
		case s.err == nil:
			require.True(t, s.ok(), "%s: %+v", s.name, s.out)
			assert.Equal(t, []string{s.reqID}, ran, "%s was answered before the kill", s.name)
		default:
			failed++
			var send *smithyhttp.RequestSendError
			require.ErrorAs(t, s.err, &send, "%s was in flight when the gateway died", s.name)
			assert.Less(t, s.done.Sub(killed), 10*time.Second, "%s fails at once", s.name)
			assert.LessOrEqual(t, len(ran), 1, s.name)
		}
	}
	return failed, lost
}

// workers returns the ids of the workers of fn that a lists: processes
// found in /proc by their label, and containers by theirs (in any state).
func workers(t *testing.T, a agent.Agent, fn string) []string {
	t.Helper()
	var ids []string
	for _, w := range listed(t, a, fn) {
		ids = append(ids, w.ID)
	}
	return ids
}

// pooled returns how many workers the gateway at addr holds for fn, idle
// or in use, or -1 when it does not answer.
func pooled(t *testing.T, addr, fn string) int {
	m := scrape(addr)
	if m == "" {
		return -1
	}
	return int(gwtest.Metric(t, m, `gateway_pool_idle{function="`+fn+`"}`) + gwtest.Metric(t, m, `gateway_pool_in_use{function="`+fn+`"}`))
}

// requireCleanedUp requires that none of the workers before (of rec) is
// left once a gateway started again serves: its start-up cleanup has
// deleted those still running.
func requireCleanedUp(t *testing.T, a agent.Agent, before []string) {
	t.Helper()
	require.NotEmpty(t, before)
	now := workers(t, a, "rec")
	for _, id := range before {
		assert.NotContains(t, now, id, "a worker of the killed gateway is left")
	}
}

// requireOnlyPooled waits until the workers that exist for each function
// are exactly the ones the gateway at addr holds: nothing left over.
func requireOnlyPooled(t *testing.T, a agent.Agent, addr string) {
	t.Helper()
	for _, fn := range []string{"rec", "cold"} {
		require.Eventually(t, func() bool { return len(workers(t, a, fn)) == pooled(t, addr, fn) }, time.Minute, 50*time.Millisecond,
			"%s: the workers that exist are the pool's: %v, pooled %d", fn, workers(t, a, fn), pooled(t, addr, fn))
	}
}

// The gateway and its agent, separate processes, each killed with SIGKILL
// mid-burst and started again (the agent alone, the gateway alone, then
// both), as README.md's "What survives which fault" says:
//
//   - the agent killed: invocations on workers finish (the workers outlive
//     it), one that needs a new worker meanwhile fails at once with 502
//     ServiceException, an event that does is retried and runs once the
//     agent is back, and everything after its restart is served;
//   - the gateway killed: a synchronous call in flight fails at once with a
//     connection error, the events it held and had not run are lost, none
//     runs twice, and the restarted gateway's start-up cleanup removes the
//     workers of the killed one;
//   - both: the same, and the restarted pair serves everything.
//
// No invocation runs twice (no client retries, and no run fails, so no
// event is retried after it ran), and at the end no worker process of the
// test's label is left.
func TestKillAgentAndGatewayMidBurst(t *testing.T) {
	lbl := label(t)
	bin, err := os.Executable()
	require.NoError(t, err)
	tpl := writeTemplate(t, "", strings.ReplaceAll(killTemplate, "{{binary}}", bin))
	killMidBurst(t, lbl, tpl, nil, localAgent(t, lbl))
}

// The same with the function as an image, its workers Docker containers
// (the agent's -docker). A create that the agent's death cuts may leave a
// container the gateway does not know (the engine made it, the answer was
// lost): a process in that case ends by itself (its runtime is refused),
// a container stays, exited, until the reconciliation deletes it, once
// older than ORPHAN_GRACE_PERIOD_SECONDS, here 3 s (checked every 0.5 s).
func TestKillAgentAndGatewayMidBurstDocker(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.Image(t, cli, "github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest/function", nil)
	tpl := writeTemplate(t, "", strings.ReplaceAll(killDockerTemplate, "{{image}}", image))
	lbl := label(t)
	a, err := agent.NewLocal(agent.Options{Label: lbl, Docker: cli})
	require.NoError(t, err)
	gwEnv := []string{envHeartbeat + "=0.5", envOrphanGrace + "=3"}
	killMidBurst(t, lbl, tpl, gwEnv, a, "-docker", os.Getenv(dockertest.EnvDocker))
}

// killMidBurst runs the gateway with the template tpl (and gwEnv) and a
// separate agent labelled lbl (with agentArgs), kills them as
// TestKillAgentAndGatewayMidBurst says, and checks with a, an agent of the
// label in this process, what workers exist.
func killMidBurst(t *testing.T, lbl, tpl string, gwEnv []string, a agent.Agent, agentArgs ...string) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	rs := newRecords(t)
	t.Cleanup(func() {
		// Whatever a failure left: the agents are killed by now.
		for _, fn := range []string{"rec", "cold"} {
			for _, w := range listed(t, a, fn) {
				_ = a.Delete(context.Background(), agent.DeleteRequest{Function: fn, ID: w.ID})
			}
		}
	})
	const sleep = 1000 // ms each invocation of a burst runs

	ag := startKillAgent(t, lbl, sock, agentArgs...)
	gw, addr := startKillGateway(t, gwEnv, lbl, sock, tpl, "127.0.0.1:0")
	c := sdk(addr)
	metric := func(series string) float64 { return gwtest.Metric(t, scrape(addr), series) }

	// 1. The agent killed mid-burst.
	v1 := rs.fire(t, c, "agent", "rec", 8, 8, sleep)
	var busy float64
	require.Eventually(t, func() bool {
		busy = metric(`gateway_pool_in_use{function="rec"}`)
		return busy >= 2
	}, time.Minute, 5*time.Millisecond)
	before := workers(t, a, "rec")
	ag.kill(t)
	killed := time.Now()
	// A call that needs a new worker fails at once; an event that does is
	// accepted, and retried.
	cold := rs.fire(t, c, "agent-down", "cold", 1, 1, 0)
	cold.wait()
	rrCold, evCold := cold.shots[0], cold.shots[1]
	var svc *types.ServiceException
	require.ErrorAs(t, rrCold.err, &svc, "a call that needs a worker while the agent is down")
	assert.Contains(t, svc.ErrorMessage(), "could not start a worker")
	assert.Less(t, rrCold.done.Sub(killed), 10*time.Second, "it fails at once, not after a wait")
	require.True(t, evCold.ok(), "%v", evCold.err)
	require.Eventually(t, func() bool {
		return strings.Contains(gw.output(t), `msg="asynchronous invocation failed: retrying" function=cold request_id=`+evCold.reqID)
	}, 30*time.Second, 20*time.Millisecond, "the event's first run failed: no worker")
	ag = startKillAgent(t, lbl, sock, agentArgs...)
	v2 := rs.fire(t, c, "agent-back", "rec", 4, 4, 10)
	v3 := rs.fire(t, c, "agent-back", "cold", 1, 0, 10)
	v1.wait()
	for _, s := range v1.shots {
		if s.ok() {
			continue
		}
		// A call that needed a new worker while the agent was down.
		require.ErrorAs(t, s.err, &svc, s.name)
		assert.Contains(t, svc.ErrorMessage(), "could not start a worker", s.name)
		assert.Empty(t, rs.ran(s), "%s failed, and did not run", s.name)
	}
	// Those in use outlive their agent and serve on; the others listed
	// may be of creates its death cut, which the gateway never knew.
	after := workers(t, a, "rec")
	kept := 0
	for _, id := range before {
		if slices.Contains(after, id) {
			kept++
		}
	}
	assert.GreaterOrEqual(t, float64(kept), busy, "the workers in use when the agent died outlive it: %v, then %v", before, after)
	var served []*shot
	for _, s := range v1.shots {
		if s.err == nil {
			served = append(served, s)
		}
	}
	rs.requireServed(t, &volley{shots: served}, time.Minute)
	rs.requireServed(t, v2, time.Minute)
	rs.requireServed(t, v3, time.Minute)
	rs.requireServed(t, &volley{shots: []*shot{evCold}}, 30*time.Second)
	t.Logf("agent killed: %d of %d invocations served, %d failed at once", len(served), len(v1.shots), len(v1.shots)-len(served))
	require.Eventually(t, func() bool { return metric("gateway_events_queued") == 0 }, time.Minute, 20*time.Millisecond)
	requireOnlyPooled(t, a, addr)

	// 2. The gateway killed mid-burst.
	v4 := rs.fire(t, c, "gateway", "rec", 8, 8, sleep)
	waitBusy(t, gw, addr)
	before = workers(t, a, "rec")
	gw.kill(t)
	killed = time.Now()
	failed, lost := rs.requireCut(t, v4, killed)
	assert.Positive(t, failed, "calls in flight when the gateway died")
	assert.Positive(t, lost, "events the killed gateway held and had not run are lost")
	t.Logf("gateway killed: %d of 8 calls failed, %d of 8 accepted events lost", failed, lost)
	gw, _ = startKillGateway(t, gwEnv, lbl, sock, tpl, addr)
	requireCleanedUp(t, a, before)
	requireOnlyPooled(t, a, addr)
	rs.requireServed(t, rs.fire(t, c, "gateway-back", "rec", 8, 8, 10), time.Minute)

	// 3. Both killed mid-burst, the agent first.
	v5 := rs.fire(t, c, "both", "rec", 8, 8, sleep)
	waitBusy(t, gw, addr)
	before = workers(t, a, "rec")
	ag.kill(t)
	gw.kill(t)
	killed = time.Now()
	failed, lost = rs.requireCut(t, v5, killed)
	t.Logf("both killed: %d of 8 calls failed, %d of 8 accepted events lost", failed, lost)
	ag = startKillAgent(t, lbl, sock, agentArgs...)
	gw, _ = startKillGateway(t, gwEnv, lbl, sock, tpl, addr)
	requireCleanedUp(t, a, before)
	requireOnlyPooled(t, a, addr)
	rs.requireServed(t, rs.fire(t, c, "both-back", "rec", 8, 8, 10), time.Minute)

	// Stopped: no worker left, and no invocation ran twice.
	gw.stop(t)
	ag.stop(t)
	for _, fn := range []string{"rec", "cold"} {
		assert.Empty(t, workers(t, a, fn), fn)
	}
	for _, s := range rs.all {
		assert.LessOrEqual(t, len(rs.ran(s)), 1, "%s ran twice", s.name)
	}
}
