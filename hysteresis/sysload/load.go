package sysload

import (
	"context"
	"time"
)

// Source says where a figure of a Load comes from.
type Source string

// Sources of the figures in a Load.
const (
	// SourceHost: /proc/stat and /proc/meminfo, the whole machine.
	SourceHost Source = "host"
	// SourceCgroup: the cgroup v2 files of the cgroup whose limit applies.
	SourceCgroup Source = "cgroup"
)

// Load is one sample of the system's load.
type Load struct {
	// At is when the sample was taken.
	At time.Time

	// CPU is the busy share, in percent (0-100), of the CPUs available
	// (CPULimit) since the previous sample.
	CPU float64
	// CPULimit is the number of CPUs available: the cgroup quota
	// (quota/period of cpu.max) or the host's CPU count.
	CPULimit float64
	// CPUSource says where CPU was measured.
	CPUSource Source

	// Memory is MemoryUsed over MemoryLimit, in percent (0-100).
	Memory float64
	// MemoryUsed and MemoryLimit are in bytes.
	MemoryUsed, MemoryLimit uint64
	// MemorySource says where the memory and swap figures come from.
	MemorySource Source

	// Swap is the swap in use, in bytes.
	Swap uint64
}

// Sampler measures the system's load. System is the implementation for
// Linux; tests and other platforms supply their own (see SamplerFunc).
type Sampler interface {
	// Sample returns the current load. CPU is measured since the previous
	// call, so a Sampler is stateful: give each consumer its own.
	Sample(ctx context.Context) (Load, error)
}

// SamplerFunc adapts a function to the Sampler interface.
type SamplerFunc func(ctx context.Context) (Load, error)

// Sample calls f(ctx).
func (f SamplerFunc) Sample(ctx context.Context) (Load, error) { return f(ctx) }
