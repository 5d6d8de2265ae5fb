package sysload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Options configures a System. The zero value reads the real machine.
type Options struct {
	// FS is the root filesystem, holding proc/ and sys/ (paths without a
	// leading slash). nil means os.DirFS("/"). Tests pass fixtures.
	FS fs.FS

	// Clock times cgroup CPU usage. nil means real time.
	Clock clock.Clock

	// IgnoreCgroup reports host figures even when a cgroup limit applies.
	IgnoreCgroup bool
}

// System samples the Linux machine, or the cgroup v2 limits the process runs
// under, from /proc and /sys/fs/cgroup. It is safe for concurrent use; CPU is
// measured between consecutive calls of Sample, whoever makes them, so give
// each consumer its own System.
type System struct {
	fsys  fs.FS
	clock clock.Clock

	// cgroup directories (paths in fsys) whose limits apply; "" for host.
	cpuDir, memDir string
	cpuLimit       float64 // CPUs: the quota, or the host's count

	mu       sync.Mutex
	prevStat procStat  // host: last /proc/stat reading
	prevUse  uint64    // cgroup: last usage_usec
	prevAt   time.Time // cgroup: when prevUse was read
	lastCPU  float64   // the figure returned when no time has passed
}

// NewSystem finds which limits apply (host, or a cgroup's memory.max and
// cpu.max, looking at the process's cgroup and its ancestors) and takes the
// first CPU reading, so the first Sample reports the CPU used since NewSystem.
// Where /proc cannot be read (not Linux) the error matches
// errors.ErrUnsupported; supply your own Sampler there.
func NewSystem(opts Options) (*System, error) {
	if opts.FS == nil {
		opts.FS = os.DirFS("/")
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	s := &System{fsys: opts.FS, clock: opts.Clock}
	st, err := s.readProcStat()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sysload: /proc not readable: %w: %w", errors.ErrUnsupported, err)
		}
		return nil, err
	}
	mi, err := s.readMeminfo()
	if err != nil {
		return nil, err
	}
	s.cpuLimit = float64(max(st.cpus, 1))
	if !opts.IgnoreCgroup {
		s.findCgroupLimits(mi.total)
	}
	if err := s.readCPU(s.clock.Now(), &st); err != nil {
		return nil, err
	}
	return s, nil
}

// Sample returns the current load. CPU covers the time since the previous
// Sample (or NewSystem); when no time has passed it repeats the last figure.
func (s *System) Sample(ctx context.Context) (Load, error) {
	if err := ctx.Err(); err != nil {
		return Load{}, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	l := Load{At: now, CPULimit: s.cpuLimit, CPUCgroup: s.cpuDir}
	if err := s.readCPU(now, nil); err != nil {
		return Load{}, err
	}
	l.CPU = s.lastCPU

	mi, err := s.readMeminfo()
	if err != nil {
		return Load{}, err
	}
	l.MemoryUsed, l.MemoryLimit = mi.total-mi.available, mi.total
	l.Swap = mi.swapTotal - mi.swapFree
	if s.memDir != "" {
		if err := s.readCgroupMemory(&l); err != nil {
			return Load{}, err
		}
	}
	l.Memory = percent(float64(l.MemoryUsed), float64(l.MemoryLimit))
	return l, nil
}

// readCPU takes a CPU reading and, unless this is the first one, sets
// s.lastCPU to the busy share since the previous reading. st, when non-nil,
// is a /proc/stat reading to use instead of reading the file again.
func (s *System) readCPU(now time.Time, st *procStat) error {
	first := s.prevAt.IsZero()
	if s.cpuDir != "" {
		b, err := fs.ReadFile(s.fsys, path.Join(s.cpuDir, "cpu.stat"))
		if err != nil {
			return fmt.Errorf("sysload: %w", err)
		}
		use, ok, err := parseKeyed(b, "usage_usec")
		if err != nil || !ok {
			return fmt.Errorf("sysload: %s/cpu.stat: no usage_usec: %w", s.cpuDir, errors.Join(err, errFormat))
		}
		if elapsed := now.Sub(s.prevAt); !first && elapsed > 0 && use >= s.prevUse {
			used := time.Duration(use-s.prevUse) * time.Microsecond
			s.lastCPU = percent(used.Seconds(), elapsed.Seconds()*s.cpuLimit)
		}
		s.prevUse, s.prevAt = use, now
		return nil
	}
	if st == nil {
		cur, err := s.readProcStat()
		if err != nil {
			return err
		}
		st = &cur
	}
	if dt := st.total - s.prevStat.total; !first && st.total > s.prevStat.total && st.busy >= s.prevStat.busy {
		s.lastCPU = percent(float64(st.busy-s.prevStat.busy), float64(dt))
	}
	s.prevStat, s.prevAt = *st, now
	return nil
}

// readCgroupMemory replaces the host memory and swap figures of l with those
// of s.memDir.
func (s *System) readCgroupMemory(l *Load) error {
	read := func(name string) ([]byte, error) {
		b, err := fs.ReadFile(s.fsys, path.Join(s.memDir, name))
		if err != nil {
			return nil, fmt.Errorf("sysload: %w", err)
		}
		return b, nil
	}
	b, err := read("memory.max")
	if err != nil {
		return err
	}
	limit, limited, err := parseMax(b)
	if err != nil {
		return fmt.Errorf("sysload: %s/memory.max: %w", s.memDir, err)
	}
	if !limited || limit >= l.MemoryLimit {
		return nil // the limit was lifted since NewSystem: the host decides
	}
	if b, err = read("memory.current"); err != nil {
		return err
	}
	cur, err := parseUint(b)
	if err != nil {
		return fmt.Errorf("sysload: %s/memory.current: %w", s.memDir, err)
	}
	// Inactive file cache is reclaimed before the OOM killer acts, so it is
	// not counted as used (as docker stats and the kubelet do).
	if b, err := read("memory.stat"); err == nil {
		if inactive, ok, err := parseKeyed(b, "inactive_file"); err == nil && ok {
			cur -= min(inactive, cur)
		}
	}
	l.MemoryUsed, l.MemoryLimit, l.MemoryCgroup = min(cur, limit), limit, s.memDir
	// Without swap accounting (memory.swap.current absent) the host figure stays.
	if b, err := read("memory.swap.current"); err == nil {
		if swap, err := parseUint(b); err == nil {
			l.Swap = swap
		}
	}
	return nil
}

func (s *System) readProcStat() (procStat, error) {
	b, err := fs.ReadFile(s.fsys, "proc/stat")
	if err != nil {
		return procStat{}, fmt.Errorf("sysload: %w", err)
	}
	st, err := parseProcStat(b)
	if err != nil {
		return st, fmt.Errorf("sysload: %w", err)
	}
	return st, nil
}

func (s *System) readMeminfo() (meminfo, error) {
	b, err := fs.ReadFile(s.fsys, "proc/meminfo")
	if err != nil {
		return meminfo{}, fmt.Errorf("sysload: %w", err)
	}
	m, err := parseMeminfo(b)
	if err != nil {
		return m, fmt.Errorf("sysload: %w", err)
	}
	return m, nil
}

// findCgroupLimits sets cpuDir and memDir to the directories of the tightest
// cgroup v2 CPU and memory limits on the path from the process's cgroup to
// the root, when they are tighter than the host. A limit set on a parent
// (a systemd slice, a pod) binds the process as much as one on its own
// cgroup. Anything unreadable means no cgroup limit.
func (s *System) findCgroupLimits(hostMem uint64) {
	b, err := fs.ReadFile(s.fsys, "proc/self/mountinfo")
	if err != nil {
		return
	}
	m, ok := parseMountinfo(b)
	if !ok {
		return
	}
	if b, err = fs.ReadFile(s.fsys, "proc/self/cgroup"); err != nil {
		return
	}
	cg, ok := parseSelfCgroup(b)
	if !ok {
		return
	}
	// The path is relative to the cgroup namespace's root; the mount shows
	// the part of the hierarchy below its own root.
	if m.root != "/" {
		if rest, ok := strings.CutPrefix(cg, m.root); ok {
			cg = rest
		}
	}
	top := strings.TrimPrefix(path.Clean(m.point), "/")
	dir := path.Join(top, cg)
	if dir != top && !strings.HasPrefix(dir, top+"/") {
		return // not below the mount point
	}
	bestCPU, bestMem := s.cpuLimit, hostMem
	for {
		if b, err := fs.ReadFile(s.fsys, path.Join(dir, "cpu.max")); err == nil {
			if cpus, limited, err := parseCPUMax(b); err == nil && limited && cpus > 0 && cpus < bestCPU {
				bestCPU, s.cpuDir = cpus, dir
			}
		}
		if b, err := fs.ReadFile(s.fsys, path.Join(dir, "memory.max")); err == nil {
			if limit, limited, err := parseMax(b); err == nil && limited && limit > 0 && limit < bestMem {
				bestMem, s.memDir = limit, dir
			}
		}
		if dir == top || dir == "." || dir == "" {
			break
		}
		dir = path.Dir(dir)
	}
	s.cpuLimit = bestCPU
}

func percent(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return min(max(part/whole*100, 0), 100)
}
