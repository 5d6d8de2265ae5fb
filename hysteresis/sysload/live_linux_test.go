package sysload_test

import (
	"context"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis/sysload"
)

// TestLiveMachine reads this machine and checks that the figures are in
// range and agree with the kernel's own summary (sysinfo(2)).
func TestLiveMachine(t *testing.T) {
	sys, err := sysload.NewSystem(sysload.Options{})
	require.NoError(t, err)
	// Burn a little CPU so that some ticks pass between the two readings.
	x := 0
	for i := range 20_000_000 {
		x ^= i
	}
	l, err := sys.Sample(context.Background())
	require.NoError(t, err)
	t.Logf("load: %+v (%d)", l, x&1)
	t.Logf("cgroup dirs: cpu %q, memory %q", l.CPUCgroup, l.MemoryCgroup)

	assert.GreaterOrEqual(t, l.CPU, 0.0)
	assert.LessOrEqual(t, l.CPU, 100.0)
	assert.Greater(t, l.CPULimit, 0.0)
	assert.Greater(t, l.Memory, 0.0)
	assert.LessOrEqual(t, l.Memory, 100.0)
	assert.LessOrEqual(t, l.MemoryUsed, l.MemoryLimit)

	var si syscall.Sysinfo_t
	require.NoError(t, syscall.Sysinfo(&si))
	unit := uint64(si.Unit)
	if l.MemoryCgroup == "" {
		assert.Equal(t, uint64(si.Totalram)*unit, l.MemoryLimit, "MemTotal is sysinfo's totalram")
		assert.LessOrEqual(t, l.Swap, uint64(si.Totalswap)*unit)
	} else {
		assert.Less(t, l.MemoryLimit, uint64(si.Totalram)*unit, "a cgroup limit is used only when tighter")
	}
	// NumCPU counts the CPUs this process may run on, at most the online
	// CPUs /proc/stat lists.
	if l.CPUCgroup == "" {
		assert.GreaterOrEqual(t, l.CPULimit, float64(runtime.NumCPU()))
	}
}
