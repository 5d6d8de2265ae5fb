package sysload_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis/sysload"
)

// fixture loads testdata/<name> into a MapFS rooted like "/".
func fixture(t *testing.T, name string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	overlay(t, m, name)
	return m
}

// overlay copies testdata/<name> over m: the next reading of the files it holds.
func overlay(t *testing.T, m fstest.MapFS, name string) {
	t.Helper()
	root := filepath.Join("testdata", name)
	err := fs.WalkDir(os.DirFS(root), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	require.NoError(t, err)
}

const hostSwap = (2097148 - 2046948) * 1024 // SwapTotal - SwapFree of the host fixture

func TestSystemFixtures(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cpuDir, memDir string
		want           sysload.Load // At is checked separately
	}{
		{
			// This machine's real files: cgroup v1 with cgroup2 at /sys/fs/cgroup/unified, no v2 limits.
			name: "host",
			want: sysload.Load{CPU: 40, CPULimit: 2, Memory: 75,
				MemoryUsed: 12000000 * 1024, MemoryLimit: 16000000 * 1024, Swap: hostSwap},
		},
		{
			// cgroup namespace, cpu.max and memory.max both "max".
			name: "unlimited",
			want: sysload.Load{CPU: 40, CPULimit: 2, Memory: 75,
				MemoryUsed: 12000000 * 1024, MemoryLimit: 16000000 * 1024, Swap: hostSwap},
		},
		{
			// Docker without a cgroup namespace: 1.5 CPUs, 1 GB, swap accounted.
			name: "container", cpuDir: "sys/fs/cgroup", memDir: "sys/fs/cgroup",
			want: sysload.Load{CPU: 60, CPULimit: 1.5, Memory: 80,
				MemoryUsed: 800000000, MemoryLimit: 1000000000, Swap: 100 << 20},
		},
		{
			// systemd: the limits are on the slice, not on the service itself.
			name: "nested", cpuDir: "sys/fs/cgroup/system.slice", memDir: "sys/fs/cgroup/system.slice",
			want: sysload.Load{CPU: 90, CPULimit: 0.5, Memory: 75,
				MemoryUsed: 1610612736, MemoryLimit: 2147483648, Swap: hostSwap},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fixture(t, tc.name)
			clk := clock.NewMock()
			sys, err := sysload.NewSystem(sysload.Options{FS: fsys, Clock: clk})
			require.NoError(t, err)

			overlay(t, fsys, tc.name+".next")
			clk.Add(time.Second)
			got, err := sys.Sample(context.Background())
			require.NoError(t, err)
			assert.Equal(t, clk.Now(), got.At)
			got.At = time.Time{}
			assert.Equal(t, tc.cpuDir, got.CPUCgroup)
			assert.Equal(t, tc.memDir, got.MemoryCgroup)
			got.CPUCgroup, got.MemoryCgroup = "", ""
			assert.InDelta(t, tc.want.CPU, got.CPU, 1e-9)
			assert.InDelta(t, tc.want.Memory, got.Memory, 1e-9)
			cpu := got.CPU
			got.CPU, got.Memory, tc.want.CPU, tc.want.Memory = 0, 0, 0, 0
			assert.Equal(t, tc.want, got)

			// No time and no ticks passed: the last CPU figure is repeated.
			again, err := sys.Sample(context.Background())
			require.NoError(t, err)
			assert.InDelta(t, cpu, again.CPU, 1e-9)
		})
	}
}

func TestSystemIgnoreCgroup(t *testing.T) {
	fsys := fixture(t, "container")
	sys, err := sysload.NewSystem(sysload.Options{FS: fsys, IgnoreCgroup: true, Clock: clock.NewMock()})
	require.NoError(t, err)
	overlay(t, fsys, "host.next")
	l, err := sys.Sample(context.Background())
	require.NoError(t, err)
	assert.Empty(t, l.CPUCgroup, "the host's figures")
	assert.Empty(t, l.MemoryCgroup, "the host's figures")
	assert.InDelta(t, 40, l.CPU, 1e-9)
	assert.InDelta(t, 75, l.Memory, 1e-9)
}

func TestSystemLimitLiftedFallsBackToHost(t *testing.T) {
	fsys := fixture(t, "container")
	sys, err := sysload.NewSystem(sysload.Options{FS: fsys, Clock: clock.NewMock()})
	require.NoError(t, err)
	fsys["sys/fs/cgroup/memory.max"] = &fstest.MapFile{Data: []byte("max\n")}
	l, err := sys.Sample(context.Background())
	require.NoError(t, err)
	assert.Empty(t, l.MemoryCgroup, "the host's figures")
	assert.InDelta(t, 75, l.Memory, 1e-9)
}

func TestSystemErrors(t *testing.T) {
	_, err := sysload.NewSystem(sysload.Options{FS: fstest.MapFS{}})
	assert.ErrorIs(t, err, errors.ErrUnsupported)

	fsys := fixture(t, "host")
	fsys["proc/meminfo"] = &fstest.MapFile{Data: []byte("garbage\n")}
	_, err = sysload.NewSystem(sysload.Options{FS: fsys})
	assert.ErrorContains(t, err, "sysload: /proc/meminfo: no MemTotal")

	fsys = fixture(t, "container")
	sys, err := sysload.NewSystem(sysload.Options{FS: fsys, Clock: clock.NewMock()})
	require.NoError(t, err)
	delete(fsys, "sys/fs/cgroup/cpu.stat")
	_, err = sys.Sample(context.Background())
	assert.ErrorIs(t, err, fs.ErrNotExist)

	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("shutting down")
	cancel(cause)
	_, err = sys.Sample(ctx)
	assert.ErrorIs(t, err, cause)
}

// TestSystemPicksTheTightestLimit edits the fixtures: a cgroup limit applies
// only when it is tighter than the host and than every other limit on the way
// to the root.
func TestSystemPicksTheTightestLimit(t *testing.T) {
	const (
		slice = "sys/fs/cgroup/system.slice"
		leaf  = "sys/fs/cgroup/system.slice/app.service"
	)
	for _, tc := range []struct {
		name           string
		fixture        string
		edit           map[string]string
		cpuDir, memDir string
		cpuLimit       float64
	}{
		{"limits looser than the host", "container",
			map[string]string{"sys/fs/cgroup/memory.max": "64000000000\n", "sys/fs/cgroup/cpu.max": "400000 100000\n"},
			"", "", 2},
		{"limit equal to the host", "container",
			map[string]string{"sys/fs/cgroup/memory.max": "16384000000\n", "sys/fs/cgroup/cpu.max": "200000 100000\n"},
			"", "", 2},
		{"leaf memory tighter than the slice", "nested",
			map[string]string{leaf + "/memory.max": "1000000000\n", leaf + "/cpu.max": "80000 100000\n"},
			slice, leaf, 0.5},
		{"leaf cpu tighter than the slice", "nested",
			map[string]string{leaf + "/cpu.max": "20000 100000\n"},
			leaf, slice, 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fixture(t, tc.fixture)
			for name, data := range tc.edit {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			sys, err := sysload.NewSystem(sysload.Options{FS: fsys, Clock: clock.NewMock()})
			require.NoError(t, err)
			l, err := sys.Sample(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.cpuDir, l.CPUCgroup)
			assert.Equal(t, tc.memDir, l.MemoryCgroup)
			assert.InDelta(t, tc.cpuLimit, l.CPULimit, 1e-12)
		})
	}
}

func TestSystemLimitRaisedAboveHostFallsBackToHost(t *testing.T) {
	fsys := fixture(t, "container")
	sys, err := sysload.NewSystem(sysload.Options{FS: fsys, Clock: clock.NewMock()})
	require.NoError(t, err)
	fsys["sys/fs/cgroup/memory.max"] = &fstest.MapFile{Data: []byte("64000000000\n")}
	l, err := sys.Sample(context.Background())
	require.NoError(t, err)
	assert.Empty(t, l.MemoryCgroup, "the host's figures")
	assert.Equal(t, uint64(hostSwap), l.Swap)
}
