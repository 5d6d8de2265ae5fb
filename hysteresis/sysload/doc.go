// Package sysload measures the load of the machine, or of the container, a
// process runs in (CPU %, memory %, swap bytes) and feeds it to a
// [hysteresis.Gate], so that a service can refuse optional work while the
// system is overloaded and accept it again only after a calm period.
//
//	gate, err := hysteresis.New([]hysteresis.Signal{
//		{Name: sysload.CPU, Warn: 70, Trip: 85, Recover: 60},
//		{Name: sysload.Memory, Warn: 75, Trip: 90, Recover: 70},
//	}, hysteresis.Options{Hold: time.Minute})
//	if err != nil {
//		return err
//	}
//	sys, err := sysload.NewSystem(sysload.Options{})
//	if err != nil {
//		return err // errors.ErrUnsupported where there is no /proc
//	}
//	mon, err := sysload.NewMonitor(sys, gate, sysload.MonitorOptions{}) // every second
//	if err != nil {
//		return err
//	}
//	defer mon.Close(ctx)
//	if gate.Overloaded() { // in an admission check
//		return errBusy
//	}
//
// [System] is the [Sampler] for Linux. CPU % is the busy share of the time
// between two readings: for the host, from /proc/stat, busy = total − idle −
// iowait (guest time is already part of user time and is not counted twice);
// for a cgroup, cpu.stat usage_usec against the wall time elapsed times the
// CPUs its cpu.max quota allows. Memory % is (MemTotal − MemAvailable) /
// MemTotal from /proc/meminfo, or, under a cgroup limit, memory.current minus
// reclaimable inactive file cache (memory.stat inactive_file) over
// memory.max, which is what a container's OOM killer looks at. Swap is
// SwapTotal − SwapFree, or memory.swap.current in a limited cgroup.
//
// The cgroup v2 figures are used when the process's cgroup, or one of its
// ancestors, has a limit tighter than the host (memory.max, cpu.max not
// "max"): a container at 95 % of its 512 MiB limit is overloaded even when the
// host is idle. Otherwise the host figures apply. cgroup v1 limits are not
// read. [Load.CPUCgroup] and [Load.MemoryCgroup] name the cgroup whose limit
// a figure is measured against. The filesystem is injectable ([Options.FS]),
// so every format is tested from fixture files.
//
// [Monitor] samples every interval on its own goroutine and feeds a Gate with
// the signals named [CPU], [Memory] and [Swap] (in bytes); [Monitor.Step]
// does one round by hand, and a negative [MonitorOptions.Interval] leaves
// the schedule to the program.
//
// # Why not gopsutil
//
// github.com/shirou/gopsutil is the usual choice, and was considered. Its
// cpu.Percent(0, ...) computes the busy share since the previous call using
// package-global state shared by every caller in the process, so two
// independent users (a gate and a metrics exporter) corrupt each other's
// figures; and its mem.VirtualMemory reports the host's memory, ignoring the
// container's cgroup limit that actually decides when the process is killed.
// What is needed here is three small, well-documented files per figure, so a
// parser of our own, with its state in a value the caller owns, costs less
// than the dependency.
package sysload
