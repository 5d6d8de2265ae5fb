// Package shim is the process every exec's command runs under: the agent's
// binary, re-executed through /proc/self/exe under the program name Name.
//
// The shim is a child subreaper (PR_SET_CHILD_SUBREAPER): whatever the
// command starts stays under it, however it detaches — "cmd &", setsid, a
// double fork — since an orphan goes to its nearest subreaper ancestor, not
// to init. So when the exec must end (its timeout, its caller gone, the
// agent stopping) the shim can kill every process the command started,
// which a signal to the command's process group cannot: a setsid'ed child
// is in a group of its own and, re-parented to init, would outlive the
// exec and, for a process sandbox, the sandbox itself.
//
// A subreaper needs no privilege, unlike the alternatives: a PID namespace
// (unshare(CLONE_NEWPID) needs CAP_SYS_ADMIN, or a user namespace that
// Docker's seccomp profile refuses), or a cgroup per exec (which needs a
// delegated cgroup tree). The Docker sandbox's agent runs as nobody with
// every capability dropped, and the shim works there as it does in a
// process sandbox.
//
// A shim runs one exec at a time, then waits for the next: a Go program's
// start costs far more than a command's (tens of milliseconds of CPU on a
// small virtual machine, more with the race detector), so the agent keeps
// idle shims and starts one only when all are busy. The agent and a shim
// talk over a unix SOCK_SEQPACKET socket, the shim's descriptor Ctrl: per
// exec the agent sends one message carrying the exec's pipes (in the order
// of the Pipe constants), and the shim answers Free once every process of
// the exec is gone. The socket's end means the agent is gone, or done with
// the shim: the shim kills whatever runs and exits.
//
// This package imports little, so that its init — which turns the program
// into a shim — runs before those of the heavier packages a binary holds
// (package initialization follows import paths, a package's imports
// first): a shim does not pay for them.
package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Name is the program name (argv[0]) under which a binary that holds the
// agent runs as a shim.
const Name = "sandbox-exec-shim"

// Ctrl is the shim's descriptor of its control socket. Its stdin, stdout
// and stderr are /dev/null; its stdin is its commands'.
const Ctrl = 3

// Free is the shim's message that it is ready for another exec.
const Free = 'f'

// The pipes of an exec, in the order the agent sends them.
const (
	PipeConfig = iota // read end: Config as JSON, then end of file
	PipeStdout        // write end: the command's stdout
	PipeStderr        // write end: the command's stderr
	PipeReport        // write end: where the shim writes its one Result
	PipeStop          // read end: end of file means stop the exec
	NumPipes
)

// Config is what the shim runs: the program's resolved path, its arguments
// (Args[0] as the caller gave it), its environment and directory, and its
// timeout, counted from the command's start: the shim's own start-up is
// not the command's time.
type Config struct {
	Path    string        `json:"path"`
	Args    []string      `json:"args"`
	Env     []string      `json:"env"`
	Dir     string        `json:"dir"`
	Timeout time.Duration `json:"timeout"`
}

// Result is what the shim reports once the command has exited (its wait
// status, whether its timeout killed it, and whether it left no process
// behind, in which case Free follows at once) or could not start (the
// error, and its errno).
type Result struct {
	Status   *uint32 `json:"status,omitempty"`
	TimedOut bool    `json:"timed_out,omitempty"`
	Done     bool    `json:"done,omitempty"`
	Error    string  `json:"error,omitempty"`
	Errno    int     `json:"errno,omitempty"`
}

// A binary that holds the agent becomes the shim when started under Name.
// This runs before main (and before a test binary's TestMain), so every
// program that can run an agent — the example, the image's sandbox-agent,
// the tests — is its own shim without a hook in its main. The shim exits
// with syscall.Exit: nothing of a program's orderly exit (a
// race-instrumented test binary's second of waiting) concerns it.
func init() {
	if len(os.Args) == 1 && os.Args[0] == Name {
		syscall.Exit(run())
	}
}

// shim is a shim process's state.
type shim struct {
	ctrl *net.UnixConn
	chld chan os.Signal // SIGCHLD
	term chan os.Signal // SIGTERM, SIGINT, SIGHUP
	// execs delivers the agent's messages (each exec's pipes); it is
	// closed when the control socket ends.
	execs chan []*os.File
}

// run serves execs until the agent closes the control socket (or dies,
// which closes it too) or the shim gets SIGTERM, SIGINT or SIGHUP: it then
// kills what runs, and exits.
func run() int {
	// Nothing but stdin, stdout and stderr reaches a command: not the
	// control socket (through which it could take over the shim), nor a
	// descriptor the agent inherited without close-on-exec.
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 1
	}
	c, err := net.FileConn(os.NewFile(Ctrl, "ctrl"))
	if err != nil {
		return 1
	}
	ctrl, ok := c.(*net.UnixConn)
	if !ok {
		return 1
	}
	s := &shim{ctrl: ctrl, chld: make(chan os.Signal, 1), term: make(chan os.Signal, 1), execs: make(chan []*os.File)}
	signal.Notify(s.chld, syscall.SIGCHLD)
	signal.Notify(s.term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go s.receive()
	for {
		select {
		case pipes, ok := <-s.execs:
			if !ok || !s.run(pipes) {
				return 0
			}
			if _, err := ctrl.Write([]byte{Free}); err != nil {
				return 0
			}
		case <-s.term:
			return 0
		}
	}
}

// receive reads the agent's messages, through the runtime's poller rather
// than a thread blocked in recvmsg(2): in a sandbox at its process limit
// every thread counts.
func (s *shim) receive() {
	defer close(s.execs)
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(4*NumPipes))
	for {
		_, oobn, _, _, err := s.ctrl.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			fds, _ = unix.ParseUnixRights(&msgs[0])
		}
		if len(fds) != NumPipes {
			for _, fd := range fds {
				_ = unix.Close(fd)
			}
			return // not the agent's message: no more
		}
		// The stop pipe is read through the poller too.
		_ = unix.SetNonblock(fds[PipeStop], true)
		pipes := make([]*os.File, NumPipes)
		for i, fd := range fds {
			pipes[i] = os.NewFile(uintptr(fd), "pipe")
		}
		s.execs <- pipes
	}
}

// run runs one exec: it reports the command's status, then waits for
// whatever the command left running (a server started with "&") to exit,
// until the command's timeout passes or the agent says stop: it then kills
// the command and every process under it and reaps them. It returns false
// when the shim must exit: the agent is gone, or a signal told it to.
func (s *shim) run(pipes []*os.File) bool {
	report := pipes[PipeReport]
	reported := false
	send := func(r Result) {
		if reported {
			return
		}
		reported = true
		b, _ := json.Marshal(r)
		_, _ = report.Write(append(b, '\n'))
		_ = report.Close()
	}
	// The agent closes the stop pipe to stop the exec, and once it is
	// over.
	stopped := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, pipes[PipeStop])
		_ = pipes[PipeStop].Close()
		close(stopped)
	}()
	var cfg Config
	err := json.NewDecoder(pipes[PipeConfig]).Decode(&cfg)
	_ = pipes[PipeConfig].Close()
	if err == nil && len(cfg.Args) == 0 {
		err = errors.New("no command")
	}
	if err != nil {
		_ = pipes[PipeStdout].Close()
		_ = pipes[PipeStderr].Close()
		send(Result{Error: fmt.Sprintf("exec shim: bad configuration (%v)", err)})
		return true
	}

	pid, err := syscall.ForkExec(cfg.Path, cfg.Args, &syscall.ProcAttr{
		Dir: cfg.Dir,
		Env: cfg.Env,
		// Fd puts the pipes in blocking mode, as a command expects them
		// (the mode is the pipe's, shared with the agent's copy).
		Files: []uintptr{os.Stdin.Fd(), pipes[PipeStdout].Fd(), pipes[PipeStderr].Fd()},
		// A group of its own, as a shell's job: "kill 0" in the command
		// does not reach the shim.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	// The output's end of file now depends on the command's processes
	// only.
	_ = pipes[PipeStdout].Close()
	_ = pipes[PipeStderr].Close()
	if err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		send(Result{Error: "fork/exec " + cfg.Path + ": " + err.Error(), Errno: int(errno)})
		return true
	}

	var deadline <-chan time.Time
	if cfg.Timeout > 0 {
		t := time.NewTimer(cfg.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	exited := false   // the command was reaped
	timedOut := false // its timeout passed
	killing := false  // report once everything is dead, not before
	var status syscall.WaitStatus
	// reap reaps every child that has exited, reports the command's
	// status once it has, and says whether any child is left. As a
	// subreaper the shim inherits every orphan under it, so no child left
	// means no process of the command's left at all.
	reap := func() bool {
		left := false
	loop:
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			switch {
			case errors.Is(err, syscall.EINTR):
			case err != nil: // ECHILD
				break loop
			case p == 0:
				left = true
				break loop
			case p == pid:
				exited, status = true, ws
			}
		}
		if exited && !killing {
			st := uint32(status)
			send(Result{Status: &st, TimedOut: timedOut, Done: !left})
		}
		return left
	}
	// kill kills the command's process group at once while the command
	// is unreaped (its pid, and so its group's id, cannot have been
	// reused), then each descendant /proc shows, over and over, since a
	// process not yet killed may fork; the report waits until all are
	// dead and reaped. Between rounds it waits for a SIGCHLD or 10 ms: an
	// orphan re-parented to the shim while still alive sends none.
	kill := func() {
		self := os.Getpid()
		killing = true
		for {
			if !exited {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			KillAll(Descendants(self))
			if !reap() {
				break
			}
			select {
			case <-s.chld:
			case <-time.After(10 * time.Millisecond):
			}
		}
		killing = false
		reap() // reports, if the command had not exited before
	}
	for reap() {
		select {
		case <-s.chld:
		case <-deadline:
			timedOut = true
			kill()
		case <-stopped:
			kill()
		case <-s.term:
			kill()
			return false
		case <-s.execs:
			// The control socket's end: the agent sends nothing while an
			// exec runs.
			kill()
			return false
		}
	}
	return true
}
