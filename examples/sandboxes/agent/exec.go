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
)

// haltWait is how long a shim told to stop may take to kill the command's
// processes and exit. Past it the agent kills the shim (the command may
// have stopped it with SIGSTOP) and, as their subreaper, what it left.
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

// job is one exec's shim, from its start until it has exited and what it
// left is dead.
type job struct {
	cmd   *exec.Cmd
	stop  *os.File    // the stop pipe's write end: closing it stops the shim
	timer *time.Timer // the exec's timeout, which also ends what it left running
	done  chan struct{}

	mu      sync.Mutex
	reason  haltReason  // why it was halted before its result was settled
	settled bool        // the result was read: later halts do not change it
	halted  bool        // the stop pipe is closed
	exited  bool        // the shim has exited
	kill    *time.Timer // kills a shim that did not stop within haltWait
}

// halt tells the shim to kill the command and everything it started.
func (j *job) halt(why haltReason) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.settled && j.reason == notHalted {
		j.reason = why
	}
	if j.halted || j.exited {
		return
	}
	j.halted = true
	_ = j.stop.Close()
	// A shim its command stopped (SIGSTOP) hears nothing until continued.
	// The signals go through a pidfd: never to a reused pid.
	_ = j.cmd.Process.Signal(syscall.SIGCONT)
	j.kill = time.AfterFunc(haltWait, func() { _ = j.cmd.Process.Kill() })
}

// settle returns why the job was halted, if it was, and fixes it.
func (j *job) settle() haltReason {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.settled = true
	return j.reason
}

// exit records that the shim has exited.
func (j *job) exit() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.exited = true
	j.timer.Stop()
	if j.kill != nil {
		j.kill.Stop()
	}
	if !j.halted {
		_ = j.stop.Close()
	}
}

// execPipes are an exec's pipes: the command's output, the shim's report
// and the stop pipe; the agent keeps the read ends and the stop pipe's
// write end.
type execPipes struct {
	outR, outW, errR, errW, repR, repW, stopR, stopW *os.File
}

func newExecPipes() (*execPipes, error) {
	var p execPipes
	for _, pair := range [][2]**os.File{{&p.outR, &p.outW}, {&p.errR, &p.errW}, {&p.repR, &p.repW}, {&p.stopR, &p.stopW}} {
		r, w, err := os.Pipe()
		if err != nil {
			p.close(p.outR, p.outW, p.errR, p.errW, p.repR, p.repW, p.stopR, p.stopW)
			return nil, err
		}
		*pair[0], *pair[1] = r, w
	}
	return &p, nil
}

func (p *execPipes) close(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// Run runs command in the work directory under a shim (see shimName) and
// returns when it exits, with its output; a timeout or the end of ctx (the
// caller went away) kills it and every process it started. What it leaves
// running in the background may outlive the reply, but not the timeout.
// Run returns an error only when the agent is closing.
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
	j, p, err := s.start(path, command, timeout)
	if errors.Is(err, errClosed) {
		return ExecResult{}, err
	}
	if err != nil {
		return notStarted(err), nil
	}

	stdout := &capped{max: s.opts.MaxOutput}
	stderr := &capped{max: s.opts.MaxOutput}
	var copies sync.WaitGroup
	var cut bool
	var cutMu sync.Mutex
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
	if !reported {
		// The shim died without a word (the command may have killed
		// it): what it left is the agent's to kill, before the reply.
		<-j.done
	}
	why := j.settle()
	// Processes the command left in the background may hold its output
	// open: it is read until they let go, or for pipeWait, then cut.
	deadline := time.Now().Add(pipeWait)
	_ = p.outR.SetReadDeadline(deadline)
	_ = p.errR.SetReadDeadline(deadline)
	copies.Wait()
	p.close(p.outR, p.errR)

	res := ExecResult{Stdout: stdout.String(), Stderr: stderr.String(), DurationMS: time.Since(start).Milliseconds()}
	if rep.Error != "" {
		r := notStarted(shimError{rep})
		r.Stdout, r.Stderr = res.Stdout, res.Stderr+r.Stderr
		return r, nil
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
type shimError struct{ r shimResult }

func (e shimError) Error() string { return e.r.Error }

func (e shimError) Unwrap() error {
	if e.r.Errno == 0 {
		return nil
	}
	return syscall.Errno(e.r.Errno)
}

// readReport reads the shim's one report; false means the shim exited
// without one.
func readReport(r io.Reader) (shimResult, bool) {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var rep shimResult
	if len(bytes.TrimSpace(b)) == 0 || json.Unmarshal(b, &rep) != nil {
		return shimResult{}, false
	}
	return rep, rep.Status != nil || rep.Error != ""
}

// start starts command's shim, with its timeout, and the goroutine that
// waits for it.
func (s *Server) start(path string, command []string, timeout time.Duration) (*job, *execPipes, error) {
	cfg, err := json.Marshal(shimConfig{Path: path, Args: command, Env: s.opts.Env})
	if err != nil {
		return nil, nil, err
	}
	p, err := newExecPipes()
	if err != nil {
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{shimName}, Dir: s.opts.Dir,
		// Nothing of the agent's environment (its token); one P is all a
		// shim needs, and every thread counts against a process limit.
		Env:        []string{"GOMAXPROCS=1"},
		Stdin:      bytes.NewReader(cfg),
		ExtraFiles: []*os.File{p.outW, p.errW, p.repW, p.stopR},
		// A group of its own: a signal to the agent's group (a process
		// sandbox's SIGKILL after its grace) does not kill the shims
		// before they have killed their commands.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	// Under s.mu, so that reapStrays never takes a shim just started for
	// a stray before it is in s.jobs.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.close(p.outR, p.outW, p.errR, p.errW, p.repR, p.repW, p.stopR, p.stopW)
		return nil, nil, errClosed
	}
	err = cmd.Start()
	var j *job
	if err == nil {
		j = &job{cmd: cmd, stop: p.stopW, done: make(chan struct{})}
		j.timer = time.AfterFunc(timeout, func() { j.halt(haltTimeout) })
		s.jobs[cmd.Process.Pid] = j
		s.wg.Add(1)
	}
	s.mu.Unlock()
	// The shim holds these now.
	p.close(p.outW, p.errW, p.repW, p.stopR)
	if err != nil {
		p.close(p.outR, p.errR, p.repR, p.stopW)
		return nil, nil, err
	}
	go s.await(j)
	return j, p, nil
}

// await waits for j's shim to exit, then kills what a shim killed before
// it could clean up left behind.
func (s *Server) await(j *job) {
	defer s.wg.Done()
	_ = j.cmd.Wait()
	j.exit()
	s.mu.Lock()
	delete(s.jobs, j.cmd.Process.Pid)
	s.mu.Unlock()
	if s.opts.Subreaper {
		s.reapStrays()
	}
	close(j.done)
}

// reapStrays kills and reaps every child of the agent that is not one of
// its shims, with everything under it: the processes of a shim that was
// killed, which the kernel re-parents to the agent, their subreaper.
func (s *Server) reapStrays() {
	s.mu.Lock()
	defer s.mu.Unlock()
	self := os.Getpid()
	for {
		tree := readProcTree()
		var strays []int
		for _, p := range tree[self] {
			if s.jobs[p] == nil {
				strays = append(strays, p)
			}
		}
		if len(strays) == 0 {
			return
		}
		for _, p := range strays {
			killAll(append(tree.descendants(p), p))
		}
		// Each is dead or dying, and the agent's own child: wait4 returns
		// at once or when SIGKILL has done its work. Their children come
		// to the agent in turn, and the next round finds them.
		for _, p := range strays {
			for {
				if _, err := syscall.Wait4(p, nil, 0, nil); !errors.Is(err, syscall.EINTR) {
					break
				}
			}
		}
	}
}
