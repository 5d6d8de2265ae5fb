package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent/internal/shim"
)

// haltWait is how long a shim told to stop may take to kill the command's
// processes. Past it the agent kills the shim (the command may have
// stopped it with SIGSTOP) and, as their subreaper, what it left. It is
// also how long after an exec's timeout the agent tells a shim to stop that
// did not on its own.
const haltWait = 2 * time.Second

// errClosed is Run's error once Close began.
var errClosed = errors.New("exec: the agent is shutting down")

// Why a job was told to stop.
type haltReason int

const (
	notHalted haltReason = iota
	haltTimeout
	haltCaller // the caller went away
	haltClose  // the agent is closing
)

// Run runs command in the work directory under a shim (see package shim) and
// returns when it exits, with its output; its timeout (counted from its
// start) or the end of ctx (the caller went away) kills it and every
// process it started. What it leaves running in the background may
// outlive the reply, but not the timeout. Run returns an error only when
// the agent is closing.
func (s *Server) Run(ctx context.Context, command []string, timeout time.Duration) (ExecResult, error) {
	start := time.Now()
	notStarted := func(err error) ExecResult {
		why := "could not start: " + err.Error()
		if errors.Is(err, syscall.EAGAIN) {
			why = "could not start: the sandbox is at its process limit (" + err.Error() + ")"
		}
		return ExecResult{ExitCode: 127, Stderr: err.Error() + "\n", Error: why,
			DurationMS: time.Since(start).Milliseconds()}
	}
	// The program is found in the agent's PATH, as exec.Command finds it;
	// a path with a slash is the work directory's business.
	path := command[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return notStarted(err), nil
		}
		path = p
	}
	ooms := oomKills()
	j, p, err := s.start(shim.Config{Path: path, Args: command, Env: s.opts.Env, Dir: s.opts.Dir, Timeout: timeout}, timeout)
	if errors.Is(err, errClosed) {
		return ExecResult{}, err
	}
	if err != nil {
		return notStarted(err), nil
	}

	stdout := &capped{max: s.opts.MaxOutput}
	stderr := &capped{max: s.opts.MaxOutput}
	var copies sync.WaitGroup
	var cutMu sync.Mutex
	cut := false
	drain := func(w io.Writer, r *os.File) {
		if _, err := io.Copy(w, r); errors.Is(err, os.ErrDeadlineExceeded) {
			cutMu.Lock()
			cut = true
			cutMu.Unlock()
		}
	}
	copies.Go(func() { drain(stdout, p.outR) })
	copies.Go(func() { drain(stderr, p.errR) })

	stopCaller := context.AfterFunc(ctx, func() { j.halt(haltCaller) })
	rep, reported := readReport(p.repR)
	stopCaller()
	_ = p.repR.Close()
	if !reported || rep.Done {
		// The shim died without a word (the command may have killed
		// it): what it left is the agent's to kill, before the reply.
		// Or it left nothing and the shim is free at once: the next
		// exec finds it idle.
		<-j.done
	}
	why := j.settle()
	// Processes the command left in the background may hold its output
	// open: it is read until they let go, or for pipeWait, then cut.
	deadline := time.Now().Add(pipeWait)
	_ = p.outR.SetReadDeadline(deadline)
	_ = p.errR.SetReadDeadline(deadline)
	copies.Wait()
	closeAll(p.outR, p.errR)

	res := ExecResult{Stdout: stdout.String(), Stderr: stderr.String(), DurationMS: time.Since(start).Milliseconds()}
	if rep.Error != "" {
		r := notStarted(shimError{rep})
		r.Stdout, r.Stderr = res.Stdout, res.Stderr+r.Stderr
		return r, nil
	}
	if rep.TimedOut {
		why = haltTimeout
	}
	var sig syscall.Signal
	if rep.Status != nil {
		ws := syscall.WaitStatus(*rep.Status)
		res.ExitCode = ws.ExitStatus()
		if ws.Signaled() {
			sig = ws.Signal()
			res.ExitCode = 128 + int(sig)
		}
	} else {
		res.ExitCode = 128 + int(syscall.SIGKILL)
	}
	if stdout.truncated() {
		res.StdoutTruncated, res.StdoutBytes = true, stdout.total
	}
	if stderr.truncated() {
		res.StderrTruncated, res.StderrBytes = true, stderr.total
	}
	oom := ooms >= 0 && oomKills() > ooms
	oomNoted := false
	const all = "the command and every process it started were killed"
	switch {
	case why == haltTimeout:
		res.TimedOut = true
		res.Error = fmt.Sprintf("timed out after %v: %s", timeout, all)
	case why == haltCaller:
		res.Error = "the caller went away: " + all
	case why == haltClose:
		res.Error = "the agent is shutting down: " + all
	case !reported && s.opts.Subreaper:
		res.Error = "the command's shim was killed (by the command?): " + all
	case !reported:
		res.Error = "the command's shim was killed (by the command?): what the command started was left to the system"
	case oom && sig == syscall.SIGKILL:
		res.Error = "killed by the kernel's out-of-memory killer: the sandbox reached its memory limit"
		oomNoted = true
	case sig != 0:
		res.Error = "killed by " + unix.SignalName(sig)
	}
	cutMu.Lock()
	if cut && res.Error == "" {
		res.Error = "background processes kept the output open; it was cut when the command exited"
	}
	cutMu.Unlock()
	if oom && !oomNoted {
		note := "the kernel's out-of-memory killer killed a process in the sandbox, which reached its memory limit"
		res.Error = strings.TrimPrefix(res.Error+"; "+note, "; ")
	}
	if res.StdoutTruncated || res.StderrTruncated {
		note := fmt.Sprintf("output over the limit of %d bytes per stream was truncated", s.opts.MaxOutput)
		res.Error = strings.TrimPrefix(res.Error+"; "+note, "; ")
	}
	s.log.Debug("exec", "command", command[0], "exit_code", res.ExitCode, "duration_ms", res.DurationMS, "timed_out", res.TimedOut)
	return res, nil
}

// shimError is the shim's report that the command could not start.
type shimError struct{ r shim.Result }

func (e shimError) Error() string { return e.r.Error }

func (e shimError) Unwrap() error {
	if e.r.Errno == 0 {
		return nil
	}
	return syscall.Errno(e.r.Errno)
}

// readReport reads the shim's one report; false means there was none (the
// shim died).
func readReport(r io.Reader) (shim.Result, bool) {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var rep shim.Result
	if len(bytes.TrimSpace(b)) == 0 || json.Unmarshal(b, &rep) != nil {
		return shim.Result{}, false
	}
	return rep, rep.Status != nil || rep.Error != ""
}
