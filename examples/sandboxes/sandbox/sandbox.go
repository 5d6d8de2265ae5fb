// Package sandbox makes the sandboxes the backend assigns to conversations:
// each runs the exec agent (package agent) in a work directory of its own,
// either as a local process (Process, the embedded default) or as a Docker
// container of the workspace-base image with resource limits and no
// outside network (Docker). Both carry a label, so that the pool's start-up
// cleanup and reconciliation find everything the system started, including
// what a crashed instance left.
package sandbox

import (
	"net"
	"strconv"
	"time"

	"github.com/ttlkit/ttlkit/pool"
)

// Sandbox is one sandbox. Its exported fields describe it completely, so a
// shared warm pool (pool/redispool) and the assignment records hand it from
// the instance that created it to any other.
type Sandbox struct {
	// ID is the container's id, or the worker's id for a process.
	ID string `json:"id"`
	// Host and Port are where its agent listens (the design's host and port).
	Host string `json:"host"`
	Port int    `json:"port"`
	// Created is when it was created.
	Created time.Time `json:"created"`
	// PID is a process sandbox's process id (its process group); 0 for a
	// container.
	PID int `json:"pid,omitempty"`
}

// Addr returns host:port of the agent.
func (s Sandbox) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Provisioner creates, checks, lists and destroys sandboxes: what the pool
// needs, plus Kind for logs and metrics.
type Provisioner interface {
	pool.Provisioner[Sandbox]
	pool.Checker[Sandbox]
	pool.Lister[Sandbox]
	// Kind is "process" or "docker".
	Kind() string
}
