// Package gwtest holds what the gateway's tests share. Its function makes
// a test binary a Lambda function: started with Env set, the binary runs an
// unchanged aws-lambda-go runtime with Handle instead of its tests, so the
// tests get real worker processes without building anything. The program
// in function/ is the same function, for an image.
package gwtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.uber.org/goleak"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

// Env, set to any value in a worker's environment, makes the test binary
// the function.
const Env = "GATEWAY_TEST_FUNCTION"

// Main is the whole body of the TestMain of a package whose tests use the
// function: the function when Env is set, else the tests with the
// goroutine-leak check (with opts, such as a goleak.Cleanup).
func Main(m *testing.M, opts ...goleak.Option) {
	if os.Getenv(Env) != "" {
		lambda.Start(Handle) // never returns
	}
	leakcheck.VerifyTestMain(m, opts...)
}

// Request is what the function does: first write Print on its stdout and
// "stderr: "+Print on its stderr (each a line), append a line of its
// request id and the time (RFC 3339, nanoseconds) to the file Record, and
// POST its request id to RecordURL (which a function in a container, with
// the host's network, reaches where it cannot reach the test's files),
// then return Echo, fail with Fail, sleep SleepMS (past its deadline too),
// or exit the runtime mid-call.
type Request struct {
	Echo      json.RawMessage `json:"echo,omitempty"`
	Fail      string          `json:"fail,omitempty"`
	SleepMS   int             `json:"sleep_ms,omitempty"`
	Exit      bool            `json:"exit,omitempty"`
	Record    string          `json:"record,omitempty"`
	RecordURL string          `json:"record_url,omitempty"`
	Print     string          `json:"print,omitempty"`
}

// Response is the function's answer, with what the runtime told it.
type Response struct {
	Echo       json.RawMessage `json:"echo,omitempty"`
	PID        int             `json:"pid"`
	ARN        string          `json:"arn"`
	RequestID  string          `json:"request_id"`
	DeadlineMS int64           `json:"deadline_ms"`
}

// Handle is the function's handler.
func Handle(ctx context.Context, req Request) (Response, error) {
	lc, _ := lambdacontext.FromContext(ctx)
	if req.Print != "" {
		fmt.Println(req.Print)
		fmt.Fprintln(os.Stderr, "stderr: "+req.Print)
	}
	if req.Record != "" {
		f, err := os.OpenFile(req.Record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return Response{}, err
		}
		_, err = fmt.Fprintln(f, lc.AwsRequestID, time.Now().Format(time.RFC3339Nano))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Response{}, err
		}
	}
	if req.RecordURL != "" {
		resp, err := http.Post(req.RecordURL, "text/plain", strings.NewReader(lc.AwsRequestID))
		if err != nil {
			return Response{}, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return Response{}, fmt.Errorf("record: %s", resp.Status)
		}
	}
	switch {
	case req.Exit:
		os.Exit(3)
	case req.Fail != "":
		return Response{}, errors.New(req.Fail)
	}
	time.Sleep(time.Duration(req.SleepMS) * time.Millisecond)
	dl, _ := ctx.Deadline()
	return Response{Echo: req.Echo, PID: os.Getpid(), ARN: lc.InvokedFunctionArn, RequestID: lc.AwsRequestID, DeadlineMS: dl.UnixMilli()}, nil
}

// Metric returns the value of series (name{labels}, as exposed) in a
// Prometheus text exposition, or 0 when it is absent.
func Metric(t testing.TB, text, series string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

// Recorded returns the lines the function appended to the file path
// (Request.Record): the request id and the time of each run.
func Recorded(t testing.TB, path string) (ids []string, at []time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		id, ts, _ := strings.Cut(line, " ")
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("recorded %q: %v", line, err)
		}
		ids, at = append(ids, id), append(at, tm)
	}
	return ids, at
}
