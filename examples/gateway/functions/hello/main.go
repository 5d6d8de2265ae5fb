// Command hello is a demo Lambda function: it greets the name it is given.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

type request struct {
	Name string `json:"name"`
}

type response struct {
	Message string `json:"message"`
	PID     int    `json:"pid"`
}

func handle(_ context.Context, req request) (response, error) {
	if req.Name == "" {
		req.Name = "world"
	}
	greeting := os.Getenv("GREETING")
	if greeting == "" {
		greeting = "Hello"
	}
	return response{Message: fmt.Sprintf("%s, %s!", greeting, req.Name), PID: os.Getpid()}, nil
}

func main() { lambda.Start(handle) }
