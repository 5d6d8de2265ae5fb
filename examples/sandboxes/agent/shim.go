package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Every exec's command runs under a shim of its own: the agent's binary,
// re-executed through /proc/self/exe under the program name shimName. The
// shim is a child subreaper (PR_SET_CHILD_SUBREAPER): whatever the command
// starts stays under it, however it detaches — "cmd &", setsid, a double
// fork — since an orphan goes to its nearest subreaper ancestor, not to
// init. So when the exec must end (its timeout, its caller gone, the agent
// stopping) the shim can kill every process the command started, which a
// signal to the command's process group cannot: a setsid'ed child is in
// a group of its own and, re-parented to init, would outlive the sandbox's
// exec and, for a process sandbox, the sandbox itself.
//
// A subreaper needs no privilege, unlike the alternatives: a PID namespace
// (unshare(CLONE_NEWPID) needs CAP_SYS_ADMIN, or a user namespace that
// Docker's seccomp profile refuses), or a cgroup per exec (which needs a
// delegated cgroup tree). The Docker sandbox's agent runs as nobody with
// every capability dropped, and the shim works there as it does in a
// process sandbox.
const shimName = "sandbox-exec-shim"

// The shim's file descriptors, as the agent passes them (exec.Cmd's
// ExtraFiles start at 3). Its stdin is its configuration (shimConfig as
// JSON); its stdout and stderr are /dev/null.
const (
	shimStdout = 3 // the command's stdout
	shimStderr = 4 // the command's stderr
	shimReport = 5 // where the shim writes its one shimResult
	shimStop   = 6 // the read end of the agent's stop pipe: end of file means stop
)

// shimConfig is what the shim runs: the program's resolved path, its
// arguments (Args[0] as the caller gave it) and its environment. (Through
// stdin rather than the shim's own environment, which holds nothing of the
// command's or the agent's.)
type shimConfig struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
}

// shimResult is what the shim reports once the command has exited (its
// wait status) or could not start (the error).
type shimResult struct {
	Status *uint32 `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
	Errno  int     `json:"errno,omitempty"`
}

// A binary that holds the agent becomes the shim when started under its
// name. This runs before main (and before a test binary's TestMain), so
// every program that can run an agent — the example, the image's
// sandbox-agent, the tests — is its own shim without a hook in its main.
// The shim exits with syscall.Exit: nothing of a program's orderly exit
// (a race-instrumented test binary's second of waiting) concerns it.
func init() {
	if len(os.Args) == 1 && os.Args[0] == shimName {
		syscall.Exit(runShim())
	}
}

// runShim runs the command it is given and waits for it; it reports the
// command's status and then waits for whatever the command left running
// (a server started with "&") to exit. When the agent closes the stop pipe
// — or dies, which closes it too — or the shim gets SIGTERM, SIGINT or
// SIGHUP, it kills the command and every process under it, reaps them,
// and exits.
func runShim() int {
	// Nothing but stdin, stdout and stderr reaches the command: not these
	// pipes (the stop pipe it could hold open), nor a descriptor the
	// agent inherited without close-on-exec.
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	}
	for fd := shimStdout; fd <= shimStop; fd++ {
		syscall.CloseOnExec(fd)
	}
	report := os.NewFile(shimReport, "report")
	reported := false
	send := func(r shimResult) {
		if reported {
			return
		}
		reported = true
		b, _ := json.Marshal(r)
		_, _ = report.Write(append(b, '\n'))
		_ = report.Close()
	}
	var cfg shimConfig
	if err := json.NewDecoder(os.Stdin).Decode(&cfg); err != nil || len(cfg.Args) == 0 {
		send(shimResult{Error: fmt.Sprintf("exec shim: bad configuration (%v)", err)})
		return 1
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		send(shimResult{Error: "exec shim: PR_SET_CHILD_SUBREAPER: " + err.Error()})
		return 1
	}
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// The stop pipe's end of file, read through the runtime's poller (a
	// non-blocking descriptor) rather than a thread blocked in read(2):
	// in a sandbox at its process limit every thread counts.
	_ = syscall.SetNonblock(shimStop, true)
	stopped := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.NewFile(shimStop, "stop"))
		close(stopped)
	}()

	null, err := os.Open(os.DevNull)
	if err != nil {
		send(shimResult{Error: "exec shim: " + err.Error()})
		return 1
	}
	pid, err := syscall.ForkExec(cfg.Path, cfg.Args, &syscall.ProcAttr{
		Env:   cfg.Env,
		Files: []uintptr{null.Fd(), shimStdout, shimStderr},
		// A group of its own, as a shell's job: "kill 0" in the command
		// does not reach the shim.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	// The output's end of file now depends on the command's processes
	// only.
	_ = syscall.Close(shimStdout)
	_ = syscall.Close(shimStderr)
	_ = null.Close()
	if err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		send(shimResult{Error: "fork/exec " + cfg.Path + ": " + err.Error(), Errno: int(errno)})
		return 0
	}

	exited := false // the command was reaped
	// reap reaps every child that has exited, reporting the command's
	// status, and says whether any child is left. As a subreaper the shim
	// inherits every orphan under it, so no child left means no process
	// of the command's left at all.
	reap := func() bool {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			switch {
			case errors.Is(err, syscall.EINTR):
			case err != nil: // ECHILD
				return false
			case p == 0:
				return true
			case p == pid:
				exited = true
				st := uint32(ws)
				send(shimResult{Status: &st})
			}
		}
	}
	for reap() {
		select {
		case <-chld:
		case <-term:
			killTree(pid, &exited, reap, chld)
			return 0
		case <-stopped:
			killTree(pid, &exited, reap, chld)
			return 0
		}
	}
	return 0
}

// killTree kills every process under the shim until none is left: the
// command's process group at once while the command is unreaped (its pid,
// and so its group's id, cannot have been reused), then each descendant
// /proc shows, over and over, since a process not yet killed may fork.
// Between rounds it waits for a SIGCHLD or 10 ms: an orphan re-parented
// to the shim while still alive sends none.
func killTree(pid int, exited *bool, reap func() bool, chld <-chan os.Signal) {
	self := os.Getpid()
	for {
		if !*exited {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		killAll(readProcTree().descendants(self))
		if !reap() {
			return
		}
		select {
		case <-chld:
		case <-time.After(10 * time.Millisecond):
		}
	}
}
