// Package sandboxes benchmarks examples/sandboxes, the AI assistant's
// per-conversation sandboxes: a new conversation's first exec with a warm
// pool against a cold create (what the warm pool is for), and an exec
// through the backend against the same exec sent to the sandbox's agent
// directly, against os/exec and against docker exec. The benchmarks are in
// sandboxes_test.go.
package sandboxes
