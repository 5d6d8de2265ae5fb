// Command echo is a demo Lambda function: it returns its payload, or fails
// with a handler error when the payload asks for one ({"fail": "why"}).
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, payload json.RawMessage) (json.RawMessage, error) {
	var req struct {
		Fail string `json:"fail"`
	}
	_ = json.Unmarshal(payload, &req)
	if req.Fail != "" {
		return nil, errors.New(req.Fail)
	}
	return payload, nil
}

func main() { lambda.Start(handle) }
