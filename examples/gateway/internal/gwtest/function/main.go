// Command function is the tests' Lambda function (gwtest.Handle) as a
// program of its own, to build into an image: a test binary is no static
// binary to run FROM scratch.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
)

func main() { lambda.Start(gwtest.Handle) }
