package shim

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Children returns the children of pid. It reads
// /proc/<pid>/task/*/children, which costs a few reads whatever else runs
// on the machine; on a kernel built without CONFIG_PROC_CHILDREN it scans
// every process's parent instead.
func Children(pid int) []int {
	if noChildrenFiles() {
		return scanChildren(pid)
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the task exited
		}
		for _, field := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(field)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// noChildrenFiles reports whether the kernel lacks
// /proc/<pid>/task/<tid>/children.
var noChildrenFiles = sync.OnceValue(func() bool {
	self := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + self + "/task/" + self + "/children")
	return errors.Is(err, fs.ErrNotExist)
})

// scanChildren finds the children of pid in every process's
// /proc/<pid>/stat.
func scanChildren(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
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

// Descendants returns every process under the processes roots (not the
// roots themselves), as /proc shows them now.
func Descendants(roots ...int) []int {
	var out []int
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		kids := Children(queue[0])
		queue = append(queue[1:], kids...)
		out = append(out, kids...)
	}
	return out
}

// KillAll sends SIGKILL to each of pids. One may have exited and been
// reaped by its parent since it was listed, but the kernel hands out pids
// in increasing order: its pid is not taken again in that instant, only
// once the pid space has wrapped around.
func KillAll(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
