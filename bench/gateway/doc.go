// Package gateway benchmarks the serverless gateway of examples/gateway on
// real worker processes (the echo demo function, an unchanged
// aws-lambda-go runtime): warm invocations through the gateway against the
// same workers driven through the Runtime API directly (the floor) and
// behind a minimal HTTP front, cold starts of a worker process and of a
// Docker container against spawning them by hand, and invocations in a
// burst at capacity. See ../README.md.
package gateway
