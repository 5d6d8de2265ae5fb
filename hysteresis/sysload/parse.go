package sysload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errFormat is wrapped by every parse error.
var errFormat = errors.New("unexpected format")

// procStat is the aggregate "cpu" line of /proc/stat, in clock ticks.
type procStat struct {
	busy, total uint64
	cpus        int // "cpuN" lines
}

// parseProcStat reads /proc/stat. The cpu line holds user nice system idle
// iowait irq softirq steal guest guest_nice; guest and guest_nice are already
// included in user and nice, so total stops at steal.
func parseProcStat(b []byte) (procStat, error) {
	var st procStat
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20) // the intr line is long
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, " ")
		switch {
		case name == "cpu":
			f := strings.Fields(rest)
			if len(f) < 4 {
				return st, fmt.Errorf("/proc/stat: cpu line has %d fields: %w", len(f), errFormat)
			}
			var v [8]uint64
			for i := 0; i < len(f) && i < 8; i++ {
				n, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					return st, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, errFormat)
				}
				v[i] = n
			}
			for _, n := range v {
				st.total += n
			}
			st.busy = st.total - v[3] - v[4] // idle, iowait
			found = true
		case strings.HasPrefix(name, "cpu"):
			st.cpus++
		}
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("/proc/stat: %w", err)
	}
	if !found {
		return st, fmt.Errorf("/proc/stat: no cpu line: %w", errFormat)
	}
	return st, nil
}

// meminfo holds the /proc/meminfo fields used, in bytes.
type meminfo struct {
	total, available, swapTotal, swapFree uint64
}

// parseMeminfo reads /proc/meminfo ("MemTotal:  16384 kB" lines). Kernels
// older than 3.14 have no MemAvailable; MemFree + Buffers + Cached stands in.
func parseMeminfo(b []byte) (meminfo, error) {
	fields := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return meminfo{}, fmt.Errorf("/proc/meminfo: %s: %w", key, errFormat)
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		fields[key] = n
	}
	m := meminfo{total: fields["MemTotal"], swapTotal: fields["SwapTotal"], swapFree: fields["SwapFree"]}
	if m.total == 0 {
		return m, fmt.Errorf("/proc/meminfo: no MemTotal: %w", errFormat)
	}
	if v, ok := fields["MemAvailable"]; ok {
		m.available = v
	} else {
		m.available = fields["MemFree"] + fields["Buffers"] + fields["Cached"]
	}
	m.available = min(m.available, m.total)
	m.swapFree = min(m.swapFree, m.swapTotal)
	return m, nil
}

// parseMax reads a cgroup v2 limit file holding a number or "max"
// (memory.max, memory.swap.max). limited is false for "max".
func parseMax(b []byte) (v uint64, limited bool, err error) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q: %w", s, errFormat)
	}
	return v, true, nil
}

// parseUint reads a file holding one number (memory.current).
func parseUint(b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, errFormat)
	}
	return v, nil
}

// parseCPUMax reads cpu.max: "$QUOTA $PERIOD" in microseconds, QUOTA "max"
// when unlimited. It returns the number of CPUs the quota allows.
func parseCPUMax(b []byte) (cpus float64, limited bool, err error) {
	f := strings.Fields(string(b))
	if len(f) == 0 || len(f) > 2 {
		return 0, false, fmt.Errorf("%q: %w", b, errFormat)
	}
	if f[0] == "max" {
		return 0, false, nil
	}
	period := 100000.0 // the kernel's default when the file has one field
	if len(f) == 2 {
		p, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || p == 0 {
			return 0, false, fmt.Errorf("period %q: %w", f[1], errFormat)
		}
		period = float64(p)
	}
	q, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("quota %q: %w", f[0], errFormat)
	}
	return float64(q) / period, true, nil
}

// parseKeyed returns the value of key in a flat-keyed cgroup file
// ("key value" lines: cpu.stat, memory.stat).
func parseKeyed(b []byte, key string) (uint64, bool, error) {
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s %q: %w", key, v, errFormat)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// mount is a cgroup2 mount from /proc/self/mountinfo.
type mount struct {
	root, point string // the mount's root within the hierarchy; its mount point
}

// parseMountinfo finds the cgroup2 mount in /proc/self/mountinfo, whose lines
// read "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER".
func parseMountinfo(b []byte) (mount, bool) {
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		for i := 6; i+1 < len(f); i++ {
			if f[i] == "-" {
				if f[i+1] == "cgroup2" && len(f) > 4 {
					return mount{root: unescapeOctal(f[3]), point: unescapeOctal(f[4])}, true
				}
				break
			}
		}
	}
	return mount{}, false
}

// unescapeOctal undoes mountinfo's \NNN escapes of spaces and the like.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseSelfCgroup returns the cgroup v2 path of /proc/self/cgroup (the
// "0::/path" line).
func parseSelfCgroup(b []byte) (string, bool) {
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return p, true
		}
	}
	return "", false
}
