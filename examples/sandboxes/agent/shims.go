package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent/internal/shim"
)

// maxIdleShims is how many idle shims an agent keeps for its next execs.
const maxIdleShims = 2

// shimProc is a shim process (see package shim) as the agent sees it.
type shimProc struct {
	cmd  *exec.Cmd
	ctrl *net.UnixConn
	job  *job // the exec it runs, or nil; under Server.mu
}

// send hands the shim an exec's pipes.
func (sh *shimProc) send(pipes ...*os.File) error {
	fds := make([]int, len(pipes))
	for i, f := range pipes {
		fds[i] = int(f.Fd())
	}
	_, _, err := sh.ctrl.WriteMsgUnix([]byte{'x'}, unix.UnixRights(fds...), nil)
	return err
}

// job is one exec, from its start until every process it started is gone.
type job struct {
	sh    *shimProc
	stop  *os.File    // the stop pipe's write end: closing it stops the exec
	timer *time.Timer // halts the exec if the shim has not ended it haltWait past its timeout
	done  chan struct{}

	mu       sync.Mutex
	reason   haltReason  // why it was halted before its result was settled
	settled  bool        // the result was read: later halts do not change it
	halted   bool        // the stop pipe is closed
	finished bool        // every process of the exec is gone
	kill     *time.Timer // kills a shim that did not stop within haltWait
}

// halt tells the shim to kill the command and everything it started.
func (j *job) halt(why haltReason) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.settled && j.reason == notHalted {
		j.reason = why
	}
	if j.halted || j.finished {
		return
	}
	j.halted = true
	_ = j.stop.Close()
	// A shim its command stopped (SIGSTOP) hears nothing until continued.
	// The signals go through a pidfd: never to a reused pid.
	_ = j.sh.cmd.Process.Signal(syscall.SIGCONT)
	j.kill = time.AfterFunc(haltWait, func() { _ = j.sh.cmd.Process.Kill() })
}

// settle returns why the job was halted, if it was, and fixes it.
func (j *job) settle() haltReason {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.settled = true
	return j.reason
}

// finish records that every process of the exec is gone.
func (j *job) finish() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.finished {
		return
	}
	j.finished = true
	j.timer.Stop()
	if j.kill != nil {
		j.kill.Stop()
	}
	if !j.halted {
		_ = j.stop.Close()
	}
	close(j.done)
}

// execPipes are an exec's pipes. The agent keeps cfgW, outR, errR, repR
// and stopW; the shim gets the other ends.
type execPipes struct {
	cfgR, cfgW, outR, outW, errR, errW, repR, repW, stopR, stopW *os.File
}

func newExecPipes() (*execPipes, error) {
	var p execPipes
	for _, pair := range [][2]**os.File{{&p.cfgR, &p.cfgW}, {&p.outR, &p.outW}, {&p.errR, &p.errW}, {&p.repR, &p.repW}, {&p.stopR, &p.stopW}} {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(p.cfgR, p.cfgW, p.outR, p.outW, p.errR, p.errW, p.repR, p.repW, p.stopR, p.stopW)
			return nil, err
		}
		*pair[0], *pair[1] = r, w
	}
	return &p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// start hands cfg to an idle shim (or a new one) and returns its job.
func (s *Server) start(cfg shim.Config, timeout time.Duration) (*job, *execPipes, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	for {
		sh, fresh, err := s.take()
		if err != nil {
			return nil, nil, err
		}
		j, p, err := s.hand(sh, b, timeout)
		if err == nil || errors.Is(err, errClosed) || fresh {
			return j, p, err
		}
		// An idle shim can die (a command may kill any process of its
		// user): the next one, or a new one.
	}
}

// take returns an idle shim, or starts one (fresh).
func (s *Server) take() (sh *shimProc, fresh bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false, errClosed
	}
	if n := len(s.idle); n > 0 {
		sh := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return sh, false, nil
	}
	s.mu.Unlock()
	sh, err = s.spawn()
	return sh, true, err
}

// hand gives the exec cfg (as JSON) to sh.
func (s *Server) hand(sh *shimProc, cfg []byte, timeout time.Duration) (*job, *execPipes, error) {
	p, err := newExecPipes()
	if err != nil {
		s.retire(sh)
		return nil, nil, err
	}
	j := &job{sh: sh, stop: p.stopW, done: make(chan struct{})}
	// The shim times the command itself; this is for a shim that could
	// not (stopped, or starved of CPU).
	backstop := timeout + haltWait
	if backstop < timeout {
		backstop = math.MaxInt64
	}
	j.timer = time.AfterFunc(backstop, func() { j.halt(haltTimeout) })
	s.mu.Lock()
	if s.closed {
		err = errClosed
	} else {
		sh.job = j
	}
	s.mu.Unlock()
	if err == nil {
		if serr := sh.send(p.cfgR, p.outW, p.errW, p.repW, p.stopR); serr != nil {
			err = fmt.Errorf("exec shim: %w", serr)
		}
	}
	// The shim holds its ends now.
	closeAll(p.cfgR, p.outW, p.errW, p.repW, p.stopR)
	if err == nil {
		// The shim reads the configuration as soon as it has the pipes;
		// one that does not within haltWait is stuck (stopped) and
		// replaced.
		_ = p.cfgW.SetWriteDeadline(time.Now().Add(haltWait))
		if _, werr := p.cfgW.Write(cfg); werr != nil {
			err = fmt.Errorf("exec shim: configuration: %w", werr)
			// It has the exec's pipes: it must not run it later.
			_ = sh.cmd.Process.Kill()
		}
	}
	_ = p.cfgW.Close()
	if err != nil {
		j.timer.Stop()
		s.mu.Lock()
		if sh.job == j {
			sh.job = nil
		}
		s.mu.Unlock()
		s.retire(sh)
		closeAll(p.outR, p.errR, p.repR, p.stopW)
		return nil, nil, err
	}
	return j, p, nil
}

// spawn starts a shim, with the goroutine that serves it.
func (s *Server) spawn() (*shimProc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exec shim: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ctrl"), os.NewFile(uintptr(fds[1]), "shim ctrl")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		return nil, fmt.Errorf("exec shim: %w", err)
	}
	sh := &shimProc{ctrl: c.(*net.UnixConn), cmd: &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{shim.Name}, Dir: "/",
		// Nothing of the agent's environment (its token); one P is all a
		// shim needs, and every thread counts against a process limit.
		Env:        []string{"GOMAXPROCS=1"},
		ExtraFiles: []*os.File{theirs},
		// A group of its own: a signal to the agent's group (a process
		// sandbox's SIGKILL past its grace) does not kill the shims
		// before they have killed their commands.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}}
	// Under s.mu, so that reapStrays never takes a shim just started for
	// a stray before it is in s.shims.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = sh.ctrl.Close()
		return nil, errClosed
	}
	err = sh.cmd.Start()
	if err == nil {
		s.shims[sh.cmd.Process.Pid] = sh
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if err != nil {
		_ = sh.ctrl.Close()
		return nil, err
	}
	go s.serve(sh)
	return sh, nil
}

// retire ends sh: closing its control socket tells it to exit.
func (s *Server) retire(sh *shimProc) { _ = sh.ctrl.Close() }

// serve reads what sh says until it exits: each shim.Free finishes its job
// and makes it idle again. Once it has exited, what it left is killed (it
// was killed itself) and its job, if any, is finished.
func (s *Server) serve(sh *shimProc) {
	defer s.wg.Done()
	buf := make([]byte, 16)
	for {
		n, err := sh.ctrl.Read(buf)
		if err != nil {
			break
		}
		if n == 1 && buf[0] == shim.Free {
			s.release(sh)
		}
	}
	_ = sh.ctrl.Close()
	_ = sh.cmd.Wait()
	s.mu.Lock()
	delete(s.shims, sh.cmd.Process.Pid)
	for i, idle := range s.idle {
		if idle == sh {
			s.idle = append(s.idle[:i], s.idle[i+1:]...)
			break
		}
	}
	j := sh.job
	sh.job = nil
	s.mu.Unlock()
	if s.opts.Subreaper {
		s.reapStrays()
	}
	if j != nil {
		j.finish()
	}
}

// release finishes sh's job, every process of which is gone, and keeps sh
// for the next exec, or retires it.
func (s *Server) release(sh *shimProc) {
	s.mu.Lock()
	j := sh.job
	sh.job = nil
	keep := j != nil && !s.closed && len(s.idle) < maxIdleShims
	if keep {
		s.idle = append(s.idle, sh)
	}
	s.mu.Unlock()
	if j != nil {
		j.finish()
	}
	if !keep {
		s.retire(sh)
	}
}

// reapStrays kills and reaps every child of the agent that is not one of
// its shims, with everything under it: the processes of a shim that was
// killed, which the kernel re-parents to the agent, their subreaper.
func (s *Server) reapStrays() {
	s.mu.Lock()
	defer s.mu.Unlock()
	self := os.Getpid()
	for {
		var strays []int
		for _, p := range shim.Children(self) {
			if s.shims[p] == nil {
				strays = append(strays, p)
			}
		}
		if len(strays) == 0 {
			return
		}
		shim.KillAll(strays)
		shim.KillAll(shim.Descendants(strays...))
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
