// Command echo is a demo Lambda function: it returns its payload, or fails
// with a handler error when the payload asks for one ({"fail": "why"}); it
// logs what the payload asks it to ({"log": "text"}), as a function logs:
// on its standard output.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, payload json.RawMessage) (json.RawMessage, error) {
	var req struct {
		Fail string `json:"fail"`
		Log  string `json:"log"`
	}
	_ = json.Unmarshal(payload, &req)
	if req.Log != "" {
		fmt.Println(req.Log)
	}
	if req.Fail != "" {
		return nil, errors.New(req.Fail)
	}
	return payload, nil
}

func main() { lambda.Start(handle) }
