// Command slow is a demo Lambda function that takes its time:
// {"ms": 200} sleeps 200 ms; {"crash": true} exits the runtime mid-call.
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

type request struct {
	MS    int  `json:"ms"`
	Crash bool `json:"crash"`
}

type response struct {
	Slept int `json:"slept_ms"`
	PID   int `json:"pid"`
}

func handle(ctx context.Context, req request) (response, error) {
	if req.Crash {
		os.Exit(3)
	}
	select {
	case <-time.After(time.Duration(req.MS) * time.Millisecond):
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
	return response{Slept: req.MS, PID: os.Getpid()}, nil
}

func main() { lambda.Start(handle) }
