//go:build linux

package process

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ttlkit/ttlkit/pool"
)

// List returns every live worker with this Provisioner's label, found by
// scanning /proc for EnvLabel: those it started and those an earlier owner
// started and left behind. Only each worker's group leader is listed (a
// worker's own children inherit the label), and zombies are not. Processes
// of other users whose environment cannot be read are not seen.
func (p *Provisioner) List(ctx context.Context) ([]pool.Listed[Worker], error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("process: list: %w", err)
	}
	boot, err := bootTime()
	if err != nil {
		return nil, fmt.Errorf("process: list: %w", err)
	}
	var out []pool.Listed[Worker]
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("process: list: %w", context.Cause(ctx))
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		w, ok := p.read(pid, boot)
		if ok {
			out = append(out, pool.Listed[Worker]{ID: w.ID, Value: w, Created: w.Created})
		}
	}
	return out, nil
}

// owns reports whether w's pid is still a live worker of this label with
// w's id.
func (p *Provisioner) owns(w Worker) bool {
	got, ok := p.read(w.PID, time.Time{})
	return ok && got.ID == w.ID
}

// read returns the worker that process pid is, if it is a live group
// leader labelled with this Provisioner's label. With a zero boot time the
// start time is not computed.
func (p *Provisioner) read(pid int, boot time.Time) (Worker, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return Worker{}, false
	}
	want := []byte(EnvLabel + "=" + p.opts.Label + ":")
	var val []byte
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.HasPrefix(kv, want) {
			val = kv[len(want):]
			break
		}
	}
	if val == nil {
		return Worker{}, false
	}
	id, portStr, ok := strings.Cut(string(val), ":")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil || id == "" {
		return Worker{}, false
	}
	st, err := readStat(dir)
	if err != nil || st.state == 'Z' || st.state == 'X' || st.pgrp != pid {
		return Worker{}, false
	}
	w := Worker{ID: id, PID: pid, Port: port, Addr: net.JoinHostPort(p.opts.Host, strconv.Itoa(port))}
	if !boot.IsZero() {
		w.Created = boot.Add(time.Duration(st.start) * time.Second / clockTicks)
	}
	return w, true
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's start time: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

type stat struct {
	state byte
	pgrp  int
	start int64
}

// readStat parses /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted after its last ')'.
func readStat(dir string) (stat, error) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return stat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("%s/stat: no command name", dir)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("%s/stat: %d fields", dir, len(f))
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseInt(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, fmt.Errorf("%s/stat: bad pgrp or start time", dir)
	}
	return stat{state: f[0][0], pgrp: pgrp, start: start}, nil
}

// bootTime returns when the machine booted, to the hundredth of a second:
// now less /proc/uptime. (/proc/stat's btime is truncated to the second,
// which made a worker up to a second older than it was, and shortened the
// orphan grace period of a pool by as much.)
func bootTime() (time.Time, error) {
	now := time.Now()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return time.Time{}, fmt.Errorf("/proc/uptime: %q", b)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("/proc/uptime: %q", f[0])
	}
	return now.Add(-time.Duration(up * float64(time.Second))), nil
}

// groupGoneWait bounds how long Destroy waits for the processes of a
// worker's group to die after SIGKILL, which the kernel delivers
// asynchronously.
const groupGoneWait = 5 * time.Second

// waitGroupGone waits until no live process is left in process group pgid
// (zombies count as gone), for at most groupGoneWait or until ctx ends, so
// that Destroy returns only when everything the worker started is dead.
func waitGroupGone(ctx context.Context, pgid int) {
	deadline := time.Now().Add(groupGoneWait)
	for groupAlive(pgid) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether a live process of group pgid exists.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := readStat(filepath.Join("/proc", e.Name()))
		if err == nil && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			return true
		}
	}
	return false
}
