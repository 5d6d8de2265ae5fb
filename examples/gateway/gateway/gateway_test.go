package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/encoding/httpbinding"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/gateway/template"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

var labels atomic.Int64

type env struct {
	gw      *gateway.Gateway
	handler http.Handler // the gateway's HTTP surface, served at url
	reg     *prometheus.Registry
	url     string
	agent   *agent.Local
	metrics func() string
}

// function is a function of capacity reserved run by this test binary.
func function(name string, timeout, reserved int) template.Function {
	return template.Function{
		Name: name, Resource: name + "Function", Handler: "bootstrap",
		Timeout: timeout, MemorySize: 128, Reserved: reserved,
		Env: map[string]string{gwtest.Env: "1"},
	}
}

// start runs a gateway of fns on real worker processes, behind a real HTTP
// server, until the test ends.
func start(t testing.TB, fns ...template.Function) *env {
	t.Helper()
	return startWith(t, func(*gateway.Config) {}, fns...)
}

// startWith is start with the configuration set changes.
func startWith(t testing.TB, set func(*gateway.Config), fns ...template.Function) *env {
	t.Helper()
	label := fmt.Sprintf("gwunit-%d-%d", os.Getpid(), labels.Add(1))
	logs := gateway.NewLogs()
	ag, err := agent.NewLocal(agent.Options{Label: label, StopGrace: time.Second, WorkerOutput: logs.Writer})
	require.NoError(t, err)
	rt := runtimeapi.New()
	rtSrv, rtAddr, err := rt.Listen("127.0.0.1:0")
	require.NoError(t, err)
	cmds := map[string][]string{}
	for _, f := range fns {
		cmds[f.Name] = []string{os.Args[0]}
	}
	m := gateway.NewMetrics()
	cfg := gateway.Config{
		Agent: ag, Runtime: rt, RuntimeAddr: rtAddr, Commands: cmds,
		IdleTimeout: time.Hour, Heartbeat: time.Hour, OrphanGrace: time.Hour, Metrics: m,
		Credentials: []sigv4.Credentials{creds}, Logs: logs,
	}
	set(&cfg)
	gw, err := gateway.New(cfg, fns)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, m.Register(reg, gw))
	require.NoError(t, gw.Start(context.Background()))
	h := gateway.NewServer(gw, reg)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, gw.Close(ctx))
		_ = rtSrv.Close()
		rt.Wait()
		for _, f := range fns {
			ws, err := ag.List(ctx, agent.ListRequest{Function: f.Name})
			assert.NoError(t, err)
			assert.Empty(t, ws, "Close deletes every worker")
		}
	})
	e := &env{gw: gw, handler: h, reg: reg, url: ts.URL, agent: ag}
	e.metrics = func() string {
		resp, err := http.Get(ts.URL + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	return e
}

type result struct {
	status int
	header http.Header
	body   []byte
}

// creds is the key pair of the tests' gateways.
var creds = sigv4.Credentials{AccessKeyID: "AKIDGATEWAYTEST", SecretAccessKey: "s3cret-0f-the-tests"}

// sign signs req, whose body is payload, as the AWS SDK's signer does for
// the lambda service, with c at time at.
func sign(t testing.TB, req *http.Request, payload []byte, c sigv4.Credentials, at time.Time) {
	t.Helper()
	sum := sha256.Sum256(payload)
	require.NoError(t, v4.NewSigner().SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey},
		req, hex.EncodeToString(sum[:]), "lambda", "us-east-1", at))
}

// invocation is a request invoking fn (a name or an ARN, escaped as the
// AWS SDK for Go escapes it)
// with payload, and header (pairs of name and value), signed with creds.
func (e *env) invocation(t *testing.T, fn string, payload []byte, header ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", e.url+"/2015-03-31/functions/"+httpbinding.EscapePath(fn, true)+"/invocations", bytes.NewReader(payload))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	sign(t, req, payload, creds, time.Now())
	return req
}

// post invokes fn with payload and header, signed with creds.
func (e *env) post(t *testing.T, fn string, payload []byte, header ...string) result {
	t.Helper()
	return do(t, e.invocation(t, fn, payload, header...))
}

// do sends req and returns the answer.
func do(t *testing.T, req *http.Request) result {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return result{resp.StatusCode, resp.Header, body}
}

func pid(t *testing.T, r result) int {
	t.Helper()
	var resp gwtest.Response
	require.NoError(t, json.Unmarshal(r.body, &resp), "%s", r.body)
	require.NotZero(t, resp.PID, "%s", r.body)
	return resp.PID
}

// lambdaError asserts the Lambda API's error shape: the exception in
// X-Amzn-ErrorType, {"Type": ..., "message": ...} and a request id.
func lambdaError(t *testing.T, r result, status int, typ, msg string) {
	t.Helper()
	assert.Equal(t, status, r.status)
	assert.Equal(t, typ, r.header.Get("X-Amzn-ErrorType"))
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	assert.Regexp(t, uuidRE, r.header.Get("X-Amzn-RequestId"))
	var doc map[string]string
	require.NoError(t, json.Unmarshal(r.body, &doc), "%s", r.body)
	fault := "User"
	if status >= 500 {
		fault = "Service"
	}
	assert.Equal(t, map[string]string{"Type": fault, "message": doc["message"]}, doc, "Lambda's keys, and only them")
	assert.Contains(t, doc["message"], msg)
}

var uuidRE = `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`

// request sends a request of method to path (below the gateway's URL)
// with body, signed with creds.
func (e *env) request(t *testing.T, method, path string, body []byte) result {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	require.NoError(t, err)
	sign(t, req, body, creds, time.Now())
	return do(t, req)
}

// Every answer carries a request id, the one an invocation gives its
// function; an operation the gateway does not have is answered in the
// Lambda API's error shape, as every other error is.
func TestRequestIDsAndUnknownOperations(t *testing.T) {
	e := start(t, function("fn", 10, 1))

	r := e.post(t, "fn", []byte(`{}`))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	id := r.header.Get("X-Amzn-RequestId")
	assert.Regexp(t, uuidRE, id)
	var resp gwtest.Response
	require.NoError(t, json.Unmarshal(r.body, &resp))
	assert.Equal(t, id, resp.RequestID, "the function's AWS request id is the client's")
	assert.NotEqual(t, id, e.post(t, "fn", []byte(`{}`)).header.Get("X-Amzn-RequestId"))

	for _, op := range []struct{ method, path string }{
		{"GET", "/2015-03-31/functions/fn/invocations"},
		{"PUT", "/2015-03-31/functions/fn/invocations"},
		{"DELETE", "/2015-03-31/functions/fn"},
		{"POST", "/2015-03-31/functions/fn/policy"},
		{"GET", "/2015-03-31/event-source-mappings/"},
		{"GET", "/2017-03-31/functions/fn/concurrency-nope"},
		{"GET", "/nothing"},
	} {
		lambdaError(t, e.request(t, op.method, op.path, nil), http.StatusNotFound, "UnknownOperationException", "Unknown operation "+op.method)
	}
	// Refusals too carry one.
	req, err := http.NewRequest("GET", e.url+"/2015-03-31/functions/", nil)
	require.NoError(t, err)
	lambdaError(t, do(t, req), http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
	resp2, err := http.Get(e.url + "/healthz")
	require.NoError(t, err)
	resp2.Body.Close()
	assert.Regexp(t, uuidRE, resp2.Header.Get("X-Amzn-RequestId"))
}

// A function is named as Lambda takes it: by name, ARN (any region and
// account) or partial ARN, with a qualifier in the name or the Qualifier
// parameter: $LATEST, and the alias and version 1 of a function with
// AutoPublishAlias. Any other qualifier is not found, never run as
// $LATEST. ARNs are in the region the client signed for.
func TestFunctionNames(t *testing.T) {
	pub := function("pub", 10, 1)
	pub.Alias = "live"
	e := start(t, function("fn", 10, 1), pub)

	for _, c := range []struct{ name, query, version, arn string }{
		{"fn", "", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:fn"},
		{"fn:$LATEST", "", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:fn:$LATEST"},
		{"fn", "$LATEST", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:fn:$LATEST"},
		{"fn:$LATEST", "$LATEST", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:fn:$LATEST"},
		{"arn:aws:lambda:eu-west-3:123456789012:function:fn", "", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:fn"},
		{"arn:aws:lambda:eu-west-3:123456789012:function:fn:$LATEST", "", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:fn:$LATEST"},
		{"123456789012:function:fn", "", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:fn"},
		{"pub", "", "$LATEST", "arn:aws:lambda:us-east-1:000000000000:function:pub"},
		{"pub:live", "", "1", "arn:aws:lambda:us-east-1:000000000000:function:pub:live"},
		{"pub", "1", "1", "arn:aws:lambda:us-east-1:000000000000:function:pub:1"},
		{"123456789012:function:pub:live", "", "1", "arn:aws:lambda:us-east-1:000000000000:function:pub:live"},
	} {
		path := "/2015-03-31/functions/" + httpbinding.EscapePath(c.name, true) + "/invocations"
		if c.query != "" {
			path += "?Qualifier=" + url.QueryEscape(c.query)
		}
		r := e.request(t, "POST", path, []byte(`{}`))
		require.Equal(t, http.StatusOK, r.status, "%s ?%s: %s", c.name, c.query, r.body)
		assert.Equal(t, c.version, r.header.Get("X-Amz-Executed-Version"), c.name)
		var resp gwtest.Response
		require.NoError(t, json.Unmarshal(r.body, &resp))
		assert.Equal(t, c.arn, resp.ARN, "the function is told the ARN it was invoked by")
	}

	for _, c := range []struct{ name, query, arn string }{
		{"nope", "", "function:nope"},
		{"fn", "1", "function:fn:1"},
		{"fn:1", "", "function:fn:1"},
		{"fn:live", "", "function:fn:live"},
		{"pub:2", "", "function:pub:2"},
		{"pub", "prod", "function:pub:prod"},
		{"arn:aws:lambda:eu-west-3:123456789012:function:fn:1", "", "function:fn:1"},
	} {
		path := "/2015-03-31/functions/" + httpbinding.EscapePath(c.name, true) + "/invocations"
		if c.query != "" {
			path += "?Qualifier=" + url.QueryEscape(c.query)
		}
		lambdaError(t, e.request(t, "POST", path, []byte(`{}`)), http.StatusNotFound, "ResourceNotFoundException",
			"Function not found: arn:aws:lambda:us-east-1:000000000000:"+c.arn)
	}
	lambdaError(t, e.request(t, "POST", "/2015-03-31/functions/fn:1/invocations?Qualifier=2", []byte(`{}`)), http.StatusBadRequest,
		"InvalidParameterValueException", "The derived qualifier from the function name does not match the specified qualifier.")
	lambdaError(t, e.post(t, "a:b:c", []byte(`{}`)), http.StatusBadRequest, "InvalidParameterValueException", "is not a function name or ARN")
	lambdaError(t, e.post(t, ":1", []byte(`{}`)), http.StatusBadRequest, "InvalidParameterValueException", "is not a function name or ARN")
	// Observed just after each answer: only the invocations that named a
	// version ran.
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, e.metrics(), `gateway_invocation_duration_seconds_count{function="fn",outcome="ok"}`) == 7
	}, 10*time.Second, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 7.0, gwtest.Metric(t, e.metrics(), `gateway_invocation_duration_seconds_count{function="fn",outcome="ok"}`))
}

// ListFunctions pages through the template's functions by name, and
// GetFunction and GetFunctionConfiguration answer what the template says of
// a function, for each of its versions; errors are the Lambda API's.
func TestReadOperations(t *testing.T) {
	pub := function("pub", 7, 3)
	pub.Alias, pub.Runtime, pub.Description, pub.Architectures = "live", "provided.al2023", "published", []string{"arm64"}
	img := function("img", 10, 1)
	img.ImageURI, img.Env = "registry.local/img:1", nil
	e := start(t, function("fn", 10, 1), pub, img)

	type page struct {
		Functions  []gateway.FunctionConfiguration
		NextMarker string
	}
	var names []string
	path := "/2015-03-31/functions/?MaxItems=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3)
		r := e.request(t, "GET", path, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var p page
		require.NoError(t, json.Unmarshal(r.body, &p))
		for _, f := range p.Functions {
			names = append(names, f.FunctionName)
		}
		if p.NextMarker == "" {
			break
		}
		path = "/2015-03-31/functions/?MaxItems=2&Marker=" + url.QueryEscape(p.NextMarker)
	}
	assert.Equal(t, []string{"fn", "img", "pub"}, names, "every function once, by name")
	r := e.request(t, "GET", "/2015-03-31/functions", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var all page
	require.NoError(t, json.Unmarshal(r.body, &all))
	require.Len(t, all.Functions, 3)
	assert.Empty(t, all.NextMarker)
	for _, bad := range []string{"0", "10001", "x"} {
		lambdaError(t, e.request(t, "GET", "/2015-03-31/functions/?MaxItems="+bad, nil), http.StatusBadRequest, "InvalidParameterValueException", "maxItems")
	}
	lambdaError(t, e.request(t, "GET", "/2015-03-31/functions/?Marker=%25%25", nil), http.StatusBadRequest, "InvalidParameterValueException", "Invalid Marker")

	r = e.request(t, "GET", "/2015-03-31/functions/pub/configuration", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Regexp(t, uuidRE, r.header.Get("X-Amzn-RequestId"))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(r.body, &doc))
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+0000$`, doc["LastModified"])
	delete(doc, "LastModified")
	assert.Equal(t, map[string]any{
		"FunctionName": "pub", "FunctionArn": "arn:aws:lambda:us-east-1:000000000000:function:pub",
		"Runtime": "provided.al2023", "Handler": "bootstrap", "Description": "published",
		"Timeout": 7.0, "MemorySize": 128.0, "Version": "$LATEST",
		"Environment": map[string]any{"Variables": map[string]any{gwtest.Env: "1"}},
		"PackageType": "Zip", "Architectures": []any{"arm64"},
		"State": "Active", "LastUpdateStatus": "Successful",
		"EphemeralStorage": map[string]any{"Size": 512.0}, "TracingConfig": map[string]any{"Mode": "PassThrough"},
	}, doc)

	var fc gateway.FunctionConfiguration
	for _, c := range []struct{ path, version, arn string }{
		{"/2015-03-31/functions/pub:live/configuration", "1", "function:pub:live"},
		{"/2015-03-31/functions/pub/configuration?Qualifier=1", "1", "function:pub:1"},
		{"/2015-03-31/functions/000000000000%3Afunction%3Apub/configuration?Qualifier=%24LATEST", "$LATEST", "function:pub:$LATEST"},
		{"/2015-03-31/functions/arn%3Aaws%3Alambda%3Aeu-west-1%3A1%3Afunction%3Afn/configuration", "$LATEST", "function:fn"},
	} {
		r = e.request(t, "GET", c.path, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", c.path, r.body)
		require.NoError(t, json.Unmarshal(r.body, &fc))
		assert.Equal(t, c.version, fc.Version, c.path)
		assert.Equal(t, "arn:aws:lambda:us-east-1:000000000000:"+c.arn, fc.FunctionArn, c.path)
	}

	r = e.request(t, "GET", "/2015-03-31/functions/img", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	doc = nil
	require.NoError(t, json.Unmarshal(r.body, &doc))
	assert.Equal(t, map[string]any{"RepositoryType": "ECR", "ImageUri": "registry.local/img:1"}, doc["Code"])
	assert.Equal(t, map[string]any{"ReservedConcurrentExecutions": 1.0}, doc["Concurrency"])
	conf := doc["Configuration"].(map[string]any)
	assert.Equal(t, "Image", conf["PackageType"])
	assert.NotContains(t, conf, "Runtime", "an image function has no runtime, as on Lambda")
	assert.NotContains(t, conf, "Handler")
	assert.NotContains(t, conf, "Environment", "none is set")

	for _, p := range []string{"/2015-03-31/functions/nope", "/2015-03-31/functions/nope/configuration",
		"/2015-03-31/functions/fn?Qualifier=1", "/2015-03-31/functions/fn:live/configuration"} {
		lambdaError(t, e.request(t, "GET", p, nil), http.StatusNotFound, "ResourceNotFoundException", "Function not found: arn:aws:lambda:us-east-1:000000000000:function:")
	}
	assert.Zero(t, gwtest.Metric(t, e.metrics(), `gateway_pool_created_total{function="fn"}`), "reading starts no worker")
}

// An Event invocation is answered 202 at once and run; a failed run (the
// function's error, a crash, no worker) is retried twice, after the retry
// delay and then twice that, with the same request id; a DryRun runs
// nothing. A bad event is refused at once, as a synchronous invocation.
func TestEventInvocations(t *testing.T) {
	const delay = 200 * time.Millisecond
	broken := function("broken", 3, 1)
	broken.Env = nil // the test binary then runs its tests instead of a runtime
	e := startWith(t, func(c *gateway.Config) {
		c.EventRetryDelay = delay
		c.Commands["broken"] = []string{"false"}
	}, function("fn", 10, 1), broken)
	dir := t.TempDir()
	event := func(fn string, req gwtest.Request) string {
		t.Helper()
		payload, err := json.Marshal(req)
		require.NoError(t, err)
		start := time.Now()
		r := e.post(t, fn, payload, "X-Amz-Invocation-Type", "Event")
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		assert.Less(t, time.Since(start), time.Second, "answered at once")
		assert.Empty(t, r.body)
		id := r.header.Get("X-Amzn-RequestId")
		assert.Regexp(t, uuidRE, id)
		return id
	}
	events := func(fn, result string) float64 {
		return gwtest.Metric(t, e.metrics(), `gateway_events_total{function="`+fn+`",result="`+result+`"}`)
	}

	ok := filepath.Join(dir, "ok")
	id := event("fn", gwtest.Request{Record: ok, SleepMS: 300})
	require.Eventually(t, func() bool { return events("fn", "succeeded") == 1 }, 10*time.Second, 10*time.Millisecond)
	ids, _ := gwtest.Recorded(t, ok)
	assert.Equal(t, []string{id}, ids, "run once, with the request id its client got")

	failing := filepath.Join(dir, "failing")
	id = event("fn", gwtest.Request{Record: failing, Fail: "boom"})
	crashing := filepath.Join(dir, "crashing")
	crashID := event("fn", gwtest.Request{Record: crashing, Exit: true})
	event("broken", gwtest.Request{})
	require.Eventually(t, func() bool {
		return events("fn", "failed") == 2 && events("broken", "failed") == 1
	}, 20*time.Second, 20*time.Millisecond)
	for path, want := range map[string]string{failing: id, crashing: crashID} {
		ids, at := gwtest.Recorded(t, path)
		require.Equal(t, []string{want, want, want}, ids, "three runs, each with the event's request id")
		assert.GreaterOrEqual(t, at[1].Sub(at[0]), delay, "the first retry after the delay")
		assert.GreaterOrEqual(t, at[2].Sub(at[1]), 2*delay, "the second after twice the delay")
	}
	m := e.metrics()
	assert.Equal(t, 4.0, gwtest.Metric(t, m, `gateway_event_retries_total{function="fn"}`))
	assert.Equal(t, 2.0, gwtest.Metric(t, m, `gateway_event_retries_total{function="broken"}`), "no worker is a failure too")
	assert.Equal(t, 3.0, gwtest.Metric(t, m, `gateway_invocation_duration_seconds_count{function="broken",outcome="create_failed"}`))
	assert.Equal(t, 3.0, gwtest.Metric(t, m, `gateway_invocation_duration_seconds_count{function="fn",outcome="crashed"}`))
	assert.Equal(t, 0.0, gwtest.Metric(t, m, `gateway_events_queued`))

	dry := filepath.Join(dir, "dry")
	payload, err := json.Marshal(gwtest.Request{Record: dry})
	require.NoError(t, err)
	r := e.post(t, "fn", payload, "X-Amz-Invocation-Type", "DryRun")
	assert.Equal(t, http.StatusNoContent, r.status)
	assert.Regexp(t, uuidRE, r.header.Get("X-Amzn-RequestId"))
	lambdaError(t, e.post(t, "nope", payload, "X-Amz-Invocation-Type", "DryRun"), http.StatusNotFound, "ResourceNotFoundException", "function:nope")
	lambdaError(t, e.post(t, "fn:1", payload, "X-Amz-Invocation-Type", "DryRun"), http.StatusNotFound, "ResourceNotFoundException", "function:fn:1")

	lambdaError(t, e.post(t, "fn", []byte(`{"a":`), "X-Amz-Invocation-Type", "Event"), http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json")
	lambdaError(t, e.post(t, "fn:1", []byte(`{}`), "X-Amz-Invocation-Type", "Event"), http.StatusNotFound, "ResourceNotFoundException", "function:fn:1")
	big := []byte(`"` + strings.Repeat("x", gateway.MaxEventPayload) + `"`)
	lambdaError(t, e.post(t, "fn", big, "X-Amz-Invocation-Type", "Event"), http.StatusRequestEntityTooLarge, "RequestTooLargeException", "1048576 bytes for the InvokeAsync operation")
	lambdaError(t, e.post(t, "fn", nil, "X-Amz-Invocation-Type", "Later"), http.StatusBadRequest, "InvalidParameterValueException", "[Event, RequestResponse, DryRun]")
	time.Sleep(100 * time.Millisecond)
	ids, _ = gwtest.Recorded(t, dry)
	assert.Empty(t, ids, "a dry run runs nothing")
	assert.Equal(t, 2.0, events("fn", "failed")+events("fn", "succeeded")-1, "no refused event ran")
}

// The queue is bounded, and in memory: Close drops the events it holds
// (one waiting for its retry here), and says so in the metrics.
func TestEventQueueBoundAndClose(t *testing.T) {
	e := startWith(t, func(c *gateway.Config) {
		c.EventRetryDelay = time.Hour
		c.MaxQueuedEvents = 1
	}, function("fn", 10, 1))
	r := e.post(t, "fn", []byte(`{"fail":"later"}`), "X-Amz-Invocation-Type", "Event")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	lambdaError(t, e.post(t, "fn", []byte(`{}`), "X-Amz-Invocation-Type", "Event"), http.StatusTooManyRequests, "TooManyRequestsException", "Rate Exceeded")
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, e.metrics(), `gateway_event_retries_total{function="fn"}`) == 1
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, e.gw.QueuedEvents(), "waiting an hour for its retry")
	r = e.post(t, "fn", []byte(`{}`))
	assert.Equal(t, http.StatusOK, r.status, "a synchronous invocation is not queued: %s", r.body)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, e.gw.Close(ctx))
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Equal(t, 0, e.gw.QueuedEvents())
	assert.Equal(t, 1.0, gwtest.Metric(t, e.metrics(), `gateway_events_total{function="fn",result="dropped"}`))
}

// logResult decodes r's X-Amz-Log-Result.
func logResult(t *testing.T, r result) string {
	t.Helper()
	h := r.header.Get("X-Amz-Log-Result")
	require.NotEmpty(t, h, "no X-Amz-Log-Result: %s", r.body)
	b, err := base64.StdEncoding.DecodeString(h)
	require.NoError(t, err)
	return string(b)
}

// X-Amz-Log-Type: Tail returns the last 4 KB of the invocation's log, as
// Lambda prints it: START, what the worker wrote on stdout and stderr
// meanwhile (and only then), a timeout's or a crash's line, END and
// REPORT.
func TestLogTail(t *testing.T) {
	e := start(t, function("fn", 1, 1))
	tail := []string{"X-Amz-Log-Type", "Tail"}

	r := e.post(t, "fn", []byte(`{"print":"hello from the function"}`), tail...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	id := r.header.Get("X-Amzn-RequestId")
	assert.Regexp(t, `^START RequestId: `+id+` Version: \$LATEST
(hello from the function
stderr: hello from the function|stderr: hello from the function
hello from the function)
END RequestId: `+id+`
REPORT RequestId: `+id+`\tDuration: \d+\.\d\d ms\tBilled Duration: \d+ ms\tMemory Size: 128 MB\t
$`, logResult(t, r))

	r = e.post(t, "fn", []byte(`{"print":"not asked"}`))
	assert.Empty(t, r.header.Get("X-Amz-Log-Result"), "only when asked")
	r = e.post(t, "fn", []byte(`{"print":"second"}`), "X-Amz-Log-Type", "None")
	assert.Empty(t, r.header.Get("X-Amz-Log-Result"))
	r = e.post(t, "fn", []byte(`{}`), tail...)
	log := logResult(t, r)
	assert.NotContains(t, log, "not asked", "another invocation's output is not this one's")
	assert.NotContains(t, log, "second")

	r = e.post(t, "fn", []byte(`{"print":"`+strings.Repeat("x", 3*gateway.LogTail)+`","fail":"after printing"}`), tail...)
	assert.Equal(t, "Unhandled", r.header.Get("X-Amz-Function-Error"))
	log = logResult(t, r)
	assert.Len(t, log, gateway.LogTail, "the last 4 KB")
	assert.True(t, strings.HasPrefix(log, "xxx"), "%.40q", log)
	assert.Contains(t, log, "\nEND RequestId: "+r.header.Get("X-Amzn-RequestId")+"\nREPORT RequestId: ")

	r = e.post(t, "fn", []byte(`{"print":"slow","sleep_ms":1500}`), tail...)
	assert.Contains(t, string(r.body), "Sandbox.Timedout")
	id = r.header.Get("X-Amzn-RequestId")
	assert.Regexp(t, `(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z `+id+` Task timed out after 1\.00 seconds\nEND RequestId: `+id+`\n`, logResult(t, r))
	assert.Contains(t, logResult(t, r), "slow\n")

	r = e.post(t, "fn", []byte(`{"exit":true}`), tail...)
	id = r.header.Get("X-Amzn-RequestId")
	assert.Contains(t, logResult(t, r), "RequestId: "+id+" Error: Runtime exited\nRuntime.ExitError\nEND RequestId: "+id+"\n")

	lambdaError(t, e.post(t, "fn", []byte(`{}`), "X-Amz-Log-Type", "All"), http.StatusBadRequest, "InvalidParameterValueException", "[None, Tail]")
	r = e.post(t, "fn", []byte(`{}`), "X-Amz-Log-Type", "Tail", "X-Amz-Invocation-Type", "Event")
	assert.Equal(t, http.StatusAccepted, r.status)
	assert.Empty(t, r.header.Get("X-Amz-Log-Result"), "an event's log goes nowhere")
}

// Without the workers' output (an agent in another process), the tail
// holds Lambda's own lines.
func TestLogTailWithoutOutput(t *testing.T) {
	e := startWith(t, func(c *gateway.Config) { c.Logs = nil }, function("fn", 10, 1))
	r := e.post(t, "fn", []byte(`{"print":"unseen"}`), "X-Amz-Log-Type", "Tail")
	id := r.header.Get("X-Amzn-RequestId")
	assert.Regexp(t, `^START RequestId: `+id+` Version: \$LATEST\nEND RequestId: `+id+`\nREPORT RequestId: `+id+`\t`, logResult(t, r))
}

// Once a drain has begun, no retry starts: the event is dropped when its
// retry is due.
func TestDrainDropsRetries(t *testing.T) {
	e := startWith(t, func(c *gateway.Config) { c.EventRetryDelay = 200 * time.Millisecond }, function("fn", 10, 1))
	record := filepath.Join(t.TempDir(), "runs")
	payload, err := json.Marshal(gwtest.Request{Record: record, Fail: "always"})
	require.NoError(t, err)
	r := e.post(t, "fn", payload, "X-Amz-Invocation-Type", "Event")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, e.metrics(), `gateway_event_retries_total{function="fn"}`) == 1
	}, 10*time.Second, 10*time.Millisecond)
	e.gw.Drain()
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, e.metrics(), `gateway_events_total{function="fn",result="dropped"}`) == 1
	}, 10*time.Second, 10*time.Millisecond)
	ids, _ := gwtest.Recorded(t, record)
	assert.Len(t, ids, 1, "the retry never ran")
	assert.Equal(t, 0, e.gw.QueuedEvents())
}

// The Invoke API's answers, as AWS Lambda gives them.
func TestInvokeAPI(t *testing.T) {
	e := start(t, function("fn", 10, 2))

	r := e.post(t, "fn", []byte(`{"echo":{"a":1}}`))
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "$LATEST", r.header.Get("X-Amz-Executed-Version"))
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	assert.Empty(t, r.header.Get("X-Amz-Function-Error"))
	assert.Contains(t, string(r.body), `"echo":{"a":1}`)
	first := pid(t, r)

	r = e.post(t, "fn", nil)
	assert.Equal(t, http.StatusOK, r.status, "an empty payload is {}: %s", r.body)
	assert.Equal(t, first, pid(t, r), "the idle worker serves the next call")

	r = e.post(t, "fn", []byte(`{"fail":"boom"}`))
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "Unhandled", r.header.Get("X-Amz-Function-Error"))
	assert.Contains(t, string(r.body), `"errorMessage":"boom"`)
	assert.Equal(t, first, pid(t, e.post(t, "fn", []byte(`{}`))), "a handler error keeps the worker")

	lambdaError(t, e.post(t, "nope", []byte(`{}`)), http.StatusNotFound, "ResourceNotFoundException",
		"Function not found: arn:aws:lambda:us-east-1:000000000000:function:nope")
	// As Lambda, a payload that is not JSON never reaches the function.
	for _, bad := range []string{"not json", `{"a":`, "  ", "{}{}"} {
		lambdaError(t, e.post(t, "fn", []byte(bad)), http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json")
	}
	creates := gwtest.Metric(t, e.metrics(), `gateway_pool_created_total{function="fn"}`)
	r = e.post(t, "fn", nil, "X-Amz-Invocation-Type", "DryRun")
	assert.Equal(t, http.StatusNoContent, r.status)
	assert.Equal(t, creates, gwtest.Metric(t, e.metrics(), `gateway_pool_created_total{function="fn"}`), "a dry run starts no worker")

	// 6 MB, as Lambda: one byte more is refused, exactly 6 MB is served.
	payload := make([]byte, gateway.MaxPayload+1)
	for i := range payload {
		payload[i] = ' '
	}
	lambdaError(t, e.post(t, "fn", payload), http.StatusRequestEntityTooLarge, "RequestTooLargeException", "6291456 bytes")
	copy(payload, `{"pad":"`)
	copy(payload[gateway.MaxPayload-2:], `"}`)
	for i := len(`{"pad":"`); i < gateway.MaxPayload-2; i++ {
		payload[i] = 'x'
	}
	r = e.post(t, "fn", payload[:gateway.MaxPayload])
	assert.Equal(t, http.StatusOK, r.status)
	assert.Empty(t, r.header.Get("X-Amz-Function-Error"), "%.200s", r.body)

	resp, err := http.Get(e.url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// The latency of an invocation is observed just after its answer.
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, e.metrics(), `gateway_invocation_duration_seconds_count{function="fn",outcome="ok"}`) == 4
	}, 10*time.Second, 10*time.Millisecond)
	m := e.metrics()
	assert.Equal(t, 2.0, gwtest.Metric(t, m, `gateway_pool_max_size{function="fn"}`))
	assert.Equal(t, 1.0, gwtest.Metric(t, m, `gateway_pool_idle{function="fn"}`))
	assert.Equal(t, 0.0, gwtest.Metric(t, m, `gateway_pool_in_use{function="fn"}`))
	assert.Equal(t, 1.0, gwtest.Metric(t, m, `gateway_pool_created_total{function="fn"}`))
	assert.Equal(t, 1.0, gwtest.Metric(t, m, `gateway_invocation_duration_seconds_count{function="fn",outcome="function_error"}`))

	// Draining: every invocation gets a clear 503, /healthz too.
	e.gw.Drain()
	lambdaError(t, e.post(t, "fn", []byte(`{}`)), http.StatusServiceUnavailable, "ServiceException", "shutting down")
	resp, err = http.Get(e.url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

// A worker is evicted when its runtime crashes mid-invocation, when it dies
// while idle (the next call is served by a new one, the client never
// sees it), when an invocation passes the function's Timeout, and when the
// client goes away mid-invocation.
func TestEvictions(t *testing.T) {
	e := start(t, function("fn", 1, 1))
	// Destroys are counted from the pool's events, which arrive just after.
	destroyed := func(reason string, n float64) {
		t.Helper()
		assert.Eventually(t, func() bool {
			return gwtest.Metric(t, e.metrics(), `gateway_workers_destroyed_total{function="fn",reason="`+reason+`"}`) == n
		}, 10*time.Second, 10*time.Millisecond, "%s destroys", reason)
	}
	gone := func(p int) {
		t.Helper()
		assert.Eventually(t, func() bool { return syscall.Kill(p, 0) != nil }, 10*time.Second, 10*time.Millisecond, "worker %d is gone", p)
	}

	// Crash mid-invocation.
	p := pid(t, e.post(t, "fn", []byte(`{}`)))
	r := e.post(t, "fn", []byte(`{"exit":true}`))
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "Unhandled", r.header.Get("X-Amz-Function-Error"))
	assert.Contains(t, string(r.body), `"errorType":"Runtime.ExitError"`)
	destroyed("crashed", 1)
	gone(p)

	// Death while idle. (An invocation sent in the instant the worker dies
	// may reach its connection before it closes; that is a crash the
	// client sees, as in Lambda.)
	p = pid(t, e.post(t, "fn", []byte(`{}`)))
	require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
	gone(p)
	r = e.post(t, "fn", []byte(`{}`))
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Empty(t, r.header.Get("X-Amz-Function-Error"), "%s", r.body)
	assert.NotEqual(t, p, pid(t, r), "a new worker")
	destroyed("crashed", 2)

	// Past the Timeout (1 s): the Lambda timeout error, the worker destroyed.
	p = pid(t, r)
	startAt := time.Now()
	r = e.post(t, "fn", []byte(`{"sleep_ms":5000}`))
	took := time.Since(startAt)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "Unhandled", r.header.Get("X-Amz-Function-Error"))
	assert.JSONEq(t, `{"errorType":"Sandbox.Timedout","errorMessage":"Task timed out after 1.00 seconds"}`, string(r.body))
	assert.GreaterOrEqual(t, took, time.Second)
	assert.Less(t, took, 4*time.Second, "not the handler's 5 s")
	destroyed("timeout", 1)
	gone(p) // the busy worker is destroyed, not returned
	assert.Equal(t, 1.0, gwtest.Metric(t, e.metrics(), `gateway_invocation_duration_seconds_count{function="fn",outcome="timeout"}`))

	// The client leaves mid-invocation.
	p = pid(t, e.post(t, "fn", []byte(`{}`)))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := e.invocation(t, "fn", []byte(`{"sleep_ms":900}`)).WithContext(ctx)
	_, err := http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	destroyed("canceled", 1)
	gone(p)
	assert.Equal(t, http.StatusOK, e.post(t, "fn", []byte(`{}`)).status)
}

// A worker killed while idle is destroyed by its pool as soon as its
// runtime's connection closes, with the pool's default options: nothing
// waits for a request to find it dead, and the next five requests are all
// served by a live worker, none of them sent to the dead one.
func TestIdleDeathRemovedAtOnce(t *testing.T) {
	e := start(t, function("fn", 3, 2))
	p := pid(t, e.post(t, "fn", []byte(`{}`)))
	require.Equal(t, 1, e.gw.Stats()["fn"].Idle)
	require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
	require.Eventually(t, func() bool { return e.gw.Stats()["fn"].Size == 0 }, 10*time.Second, 5*time.Millisecond,
		"the dead idle worker is destroyed before any request comes")
	crashed := func() float64 {
		return gwtest.Metric(t, e.metrics(), `gateway_workers_destroyed_total{function="fn",reason="crashed"}`)
	}
	// Destroys are counted from the pool's events, which arrive just after.
	require.Eventually(t, func() bool { return crashed() == 1 }, 10*time.Second, 5*time.Millisecond, "counted as a crash")
	for i := range 5 {
		r := e.post(t, "fn", []byte(`{}`))
		require.Equal(t, http.StatusOK, r.status, "request %d: %s", i, r.body)
		require.Empty(t, r.header.Get("X-Amz-Function-Error"), "request %d: %s", i, r.body)
		require.NotEqual(t, p, pid(t, r), "request %d went to the dead worker", i)
	}
	assert.Equal(t, 1.0, crashed(), "no request met the dead worker")
	assert.Equal(t, 2.0, gwtest.Metric(t, e.metrics(), `gateway_pool_created_total{function="fn"}`), "one worker replaced the dead one")
}

// A worker that cannot start gives a 502 naming the cause; the capacity
// it held is free again.
func TestCreateFailure(t *testing.T) {
	bad := function("bad", 3, 1)
	bad.Env = nil // the test binary then runs its tests instead of a runtime
	e := start(t, bad)
	require.NoError(t, e.gw.Apply([]template.Function{bad}, map[string][]string{"bad": {"false"}}))
	startAt := time.Now()
	r := e.post(t, "bad", []byte(`{}`))
	lambdaError(t, r, http.StatusBadGateway, "ServiceException", "could not start a worker")
	assert.Contains(t, string(r.body), "its program ended before its runtime asked for an invocation")
	assert.Less(t, time.Since(startAt), 10*time.Second, "not the create timeout")
	assert.Equal(t, 0.0, gwtest.Metric(t, e.metrics(), `gateway_pool_in_use{function="bad"}`))
	r = e.post(t, "bad", []byte(`{}`))
	assert.Equal(t, http.StatusBadGateway, r.status, "and again, not stuck at capacity")
}

// Apply changes capacities at once and functions by name; a function taken
// out of the template is no longer invocable, and its warm workers go at
// the idle timeout instead of being kept (and re-created) forever.
func TestApply(t *testing.T) {
	a, b := function("a", 3, 1), function("b", 3, 1)
	b.Provisioned = 1
	e := startWith(t, func(c *gateway.Config) { c.IdleTimeout, c.Heartbeat = 200*time.Millisecond, 50*time.Millisecond }, a, b)
	require.Equal(t, http.StatusOK, e.post(t, "a", []byte(`{}`)).status)
	require.Eventually(t, func() bool { return e.gw.Stats()["b"].Idle == 1 }, 10*time.Second, 10*time.Millisecond, "b's warm worker")

	a.Reserved, a.Provisioned = 4, 1
	require.NoError(t, e.gw.Apply([]template.Function{a}, map[string][]string{"a": {os.Args[0]}}))
	assert.Equal(t, 4, e.gw.Stats()["a"].MaxSize)
	require.Eventually(t, func() bool { return e.gw.Stats()["a"].Idle >= 1 }, 10*time.Second, 10*time.Millisecond, "the warm minimum")
	lambdaError(t, e.post(t, "b", []byte(`{}`)), http.StatusNotFound, "ResourceNotFoundException", "function:b")
	_, ok := e.gw.Function("b")
	assert.False(t, ok)
	assert.Equal(t, http.StatusOK, e.post(t, "a", []byte(`{}`)).status)
	require.Eventually(t, func() bool { return e.gw.Stats()["b"].Size == 0 }, 10*time.Second, 10*time.Millisecond, "b's worker pruned")
	time.Sleep(200 * time.Millisecond) // a few heartbeats
	assert.Zero(t, e.gw.Stats()["b"].Size, "and not re-created")
	assert.Zero(t, e.gw.Stats()["b"].CreateFailures)
}
