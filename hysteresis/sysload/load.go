package sysload

import (
	"context"
	"time"
)

// Names of the signals a Monitor feeds to a Gate.
const (
	// CPU is the busy share of the available CPU, in percent (0-100).
	CPU = "cpu"
	// Memory is the used share of the available memory, in percent (0-100).
	Memory = "memory"
	// Swap is the swap in use, in bytes.
	Swap = "swap"
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
	// CPUCgroup is the cgroup v2 directory (a path in Options.FS, without
	// a leading slash) whose cpu.max quota CPU is measured against; "" when
	// the host's /proc/stat applies.
	CPUCgroup string

	// Memory is MemoryUsed over MemoryLimit, in percent (0-100).
	Memory float64
	// MemoryUsed and MemoryLimit are in bytes.
	MemoryUsed, MemoryLimit uint64
	// MemoryCgroup is the cgroup v2 directory whose memory.max the memory
	// and swap figures are measured against; "" when the host's
	// /proc/meminfo applies.
	MemoryCgroup string

	// Swap is the swap in use, in bytes.
	Swap uint64
}

// Sampler measures the system's load. [System] is the implementation for
// Linux; tests and other platforms supply their own.
type Sampler interface {
	// Sample returns the current load. CPU is measured since the previous
	// call, so a Sampler is stateful: give each consumer its own.
	Sample(ctx context.Context) (Load, error)
}
