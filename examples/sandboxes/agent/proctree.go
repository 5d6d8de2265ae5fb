package agent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procTree maps each process to its children, as /proc says at the time
// it is read. Every process is scanned (not /proc/<pid>/task/*/children,
// which a kernel built without CONFIG_PROC_CHILDREN lacks): in a sandbox
// that is a few hundred files at most.
type procTree map[int][]int

func readProcTree() procTree {
	t := procTree{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return t
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			t[ppid] = append(t[ppid], pid)
		}
	}
	return t
}

// parentOf reads the parent of pid from /proc/<pid>/stat, whose fourth
// field follows the command name, which may hold spaces and parentheses.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// descendants returns every process under pid.
func (t procTree) descendants(pid int) []int {
	var out []int
	queue := append([]int(nil), t[pid]...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, t[p]...)
	}
	return out
}

// killAll sends SIGKILL to each of pids. One may have exited and been
// reaped by its parent since the tree was read, but the kernel hands out
// pids in increasing order: its pid is not taken again in that instant,
// only once the pid space has wrapped around.
func killAll(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
