package sysload

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	b, err := os.ReadFile("testdata/host/proc/stat")
	require.NoError(t, err)
	st, err := parseProcStat(b)
	require.NoError(t, err)
	// user nice system idle iowait irq softirq steal; guest (50) not added again
	assert.Equal(t, uint64(31732+10644+96821+2939+147+106), st.total)
	assert.Equal(t, uint64(31732+10644+147+106), st.busy)
	assert.Equal(t, 2, st.cpus)

	// Old kernels print fewer columns.
	st, err = parseProcStat([]byte("cpu  10 0 5 100\ncpu0 10 0 5 100\n"))
	require.NoError(t, err)
	assert.Equal(t, procStat{busy: 15, total: 115, cpus: 1}, st)

	for _, bad := range []string{"", "intr 1 2 3\n", "cpu  1 2\n", "cpu  1 x 3 4 5\n"} {
		_, err := parseProcStat([]byte(bad))
		assert.ErrorIs(t, err, errFormat, "%q", bad)
	}
}

func TestParseMeminfo(t *testing.T) {
	b, err := os.ReadFile("testdata/host/proc/meminfo")
	require.NoError(t, err)
	m, err := parseMeminfo(b)
	require.NoError(t, err)
	assert.Equal(t, meminfo{total: 16000000 * 1024, available: 4000000 * 1024,
		swapTotal: 2097148 * 1024, swapFree: 2046948 * 1024}, m)

	// Before Linux 3.14: no MemAvailable.
	m, err = parseMeminfo([]byte("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n"))
	require.NoError(t, err)
	assert.Equal(t, uint64(400*1024), m.available)

	_, err = parseMeminfo([]byte("MemTotal: lots kB\n"))
	assert.ErrorIs(t, err, errFormat)
	_, err = parseMeminfo([]byte("MemFree: 100 kB\n"))
	assert.ErrorIs(t, err, errFormat)
}

func TestParseCgroupFiles(t *testing.T) {
	v, limited, err := parseMax([]byte("max\n"))
	require.NoError(t, err)
	assert.False(t, limited)
	assert.Zero(t, v)
	v, limited, err = parseMax([]byte("536870912\n"))
	require.NoError(t, err)
	assert.True(t, limited)
	assert.Equal(t, uint64(536870912), v)
	_, _, err = parseMax([]byte("-1\n"))
	assert.ErrorIs(t, err, errFormat)

	for in, want := range map[string]float64{"150000 100000\n": 1.5, "50000 100000": 0.5, "200000\n": 2, "400000 200000": 2} {
		cpus, limited, err := parseCPUMax([]byte(in))
		require.NoError(t, err, in)
		assert.True(t, limited, in)
		assert.InDelta(t, want, cpus, 1e-12, in)
	}
	_, limited, err = parseCPUMax([]byte("max 100000\n"))
	require.NoError(t, err)
	assert.False(t, limited)
	for _, bad := range []string{"", "x 100000", "100 0", "1 2 3"} {
		_, _, err := parseCPUMax([]byte(bad))
		assert.ErrorIs(t, err, errFormat, "%q", bad)
	}

	b, err := os.ReadFile("testdata/container/sys/fs/cgroup/cpu.stat")
	require.NoError(t, err)
	n, ok, err := parseKeyed(b, "usage_usec")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, uint64(5000000), n)
	_, ok, err = parseKeyed(b, "usage")
	require.NoError(t, err)
	assert.False(t, ok, "keys match whole")
	_, _, err = parseKeyed([]byte("usage_usec many\n"), "usage_usec")
	assert.ErrorIs(t, err, errFormat)
}

func TestParseMountinfoAndCgroup(t *testing.T) {
	for file, want := range map[string]mount{
		"testdata/host/proc/self/mountinfo":      {root: "/", point: "/sys/fs/cgroup/unified"}, // hybrid v1 + v2
		"testdata/container/proc/self/mountinfo": {root: "/system.slice/docker-0123abcd.scope", point: "/sys/fs/cgroup"},
		"testdata/nested/proc/self/mountinfo":    {root: "/", point: "/sys/fs/cgroup"},
	} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		m, ok := parseMountinfo(b)
		assert.True(t, ok, file)
		assert.Equal(t, want, m, file)
	}
	_, ok := parseMountinfo([]byte("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"))
	assert.False(t, ok, "cgroup v1 only")
	m, ok := parseMountinfo([]byte(`7 1 0:9 / /mnt/cgroup\040two rw shared:3 - cgroup2 none rw` + "\n"))
	assert.True(t, ok)
	assert.Equal(t, "/mnt/cgroup two", m.point)

	b, err := os.ReadFile("testdata/host/proc/self/cgroup")
	require.NoError(t, err)
	p, ok := parseSelfCgroup(b)
	assert.True(t, ok)
	assert.Equal(t, "/", p)
	p, ok = parseSelfCgroup([]byte("0::/system.slice/app.service\n"))
	assert.True(t, ok)
	assert.Equal(t, "/system.slice/app.service", p)
	_, ok = parseSelfCgroup([]byte("4:memory:/x\n"))
	assert.False(t, ok)
}
