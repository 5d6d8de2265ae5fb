// Package gwtest holds what the gateway's tests share. Its function makes
// a test binary a Lambda function: started with Env set, the binary runs an
// unchanged aws-lambda-go runtime with Handle instead of its tests, so the
// tests get real worker processes without building anything.
package gwtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

// Env, set to any value in a worker's environment, makes the test binary
// the function.
const Env = "GATEWAY_TEST_FUNCTION"

// Main is the whole body of the TestMain of a package whose tests use the
// function: the function when Env is set, else the tests with the
// goroutine-leak check.
func Main(m *testing.M) {
	if os.Getenv(Env) != "" {
		lambda.Start(Handle) // never returns
	}
	leakcheck.VerifyTestMain(m)
}

// Request is what the function does: return Echo, fail with Fail, sleep
// SleepMS (past its deadline too), or exit the runtime mid-call.
type Request struct {
	Echo    json.RawMessage `json:"echo,omitempty"`
	Fail    string          `json:"fail,omitempty"`
	SleepMS int             `json:"sleep_ms,omitempty"`
	Exit    bool            `json:"exit,omitempty"`
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
	switch {
	case req.Exit:
		os.Exit(3)
	case req.Fail != "":
		return Response{}, errors.New(req.Fail)
	}
	time.Sleep(time.Duration(req.SleepMS) * time.Millisecond)
	lc, _ := lambdacontext.FromContext(ctx)
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
