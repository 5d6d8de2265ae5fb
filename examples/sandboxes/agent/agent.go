// Package agent is the exec agent that runs inside every sandbox: a small
// HTTP server that runs commands in the sandbox's work directory with a
// timeout and an output limit, reads and writes files under that directory,
// exports and imports it as a tar archive (for the archive a destroyed
// sandbox leaves and the restore into its successor), and answers /healthz.
//
// The backend reaches it over HTTP (Client); nothing else in the sandbox
// knows about the backend. It is built into the example's binary (the
// "agent" subcommand), so the same static binary serves a process sandbox
// and the workspace-base image.
package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
)

// Defaults for the zero Options.
const (
	DefaultMaxOutput  = 1 << 20   // bytes of stdout and of stderr kept per exec
	DefaultMaxFile    = 64 << 20  // bytes of one file written through PUT /files
	DefaultMaxArchive = 512 << 20 // bytes of files one PUT /archive may extract
	DefaultTimeout    = 10 * time.Minute
	DefaultPath       = "/usr/local/bin:/usr/bin:/bin"
	// MaxCommand bounds the bytes of one exec's command (all its arguments).
	MaxCommand = 128 << 10
)

// pipeWait is how long an exec's output is read, once its command has
// exited, while processes it left in the background hold it open. After
// that the output is cut there; they keep running (a server started with
// "&"), as they would after a shell's command, until the exec's timeout.
const pipeWait = 500 * time.Millisecond

// Options configures an agent.
type Options struct {
	// Dir is the work directory: commands run in it and files are read
	// and written under it. Required; created if missing.
	Dir string
	// MaxOutput is how many bytes of stdout, and of stderr, one exec
	// returns; the rest is counted and dropped. 0 means DefaultMaxOutput.
	MaxOutput int64
	// MaxFile bounds one file written with PUT /files. 0 means
	// DefaultMaxFile.
	MaxFile int64
	// MaxArchive bounds the bytes of files PUT /archive extracts. 0 means
	// DefaultMaxArchive.
	MaxArchive int64
	// Env is the commands' environment. Nil means PATH=DefaultPath and
	// HOME=Dir.
	Env []string
	// Token, if set, is required of every request but GET /healthz, as
	// "Authorization: Bearer <token>": only the backend drives the agent.
	Token string
	// Hosts are the Host names the agent answers to besides loopback
	// names and IP addresses (see webguard.Options.Hosts). Requests for
	// any other name (DNS rebinding) and requests a browser sends for
	// another site are refused with 403 before anything else.
	Hosts []string
	// Subreaper makes the process a child subreaper that kills every
	// process re-parented to it but its execs' shims: what a command left
	// when it killed its own shim. It is a setting of the whole process,
	// for a program that runs one agent and nothing else (Main sets it).
	Subreaper bool
	// Logger receives one line per exec at Debug and failures at Warn; nil
	// discards them.
	Logger *slog.Logger
}

// ExecRequest is the body of POST /exec.
type ExecRequest struct {
	// Command is the program and its arguments (["sh", "-c", "..."]).
	Command []string `json:"command"`
	// TimeoutSec bounds the command and everything it starts: past it
	// they are killed, background processes included. 0 means
	// DefaultTimeout.
	TimeoutSec float64 `json:"timeout_sec,omitempty"`
}

// ExecResult is the reply to POST /exec.
type ExecResult struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	// TimedOut is set when the command ran past its timeout and was
	// killed, with every process it started; ExitCode is then 137
	// (SIGKILL, as a shell reports it).
	TimedOut bool `json:"timed_out,omitempty"`
	// StdoutTruncated and StderrTruncated say that the output went over
	// the limit and was cut; StdoutBytes and StderrBytes are then how much
	// the command wrote in all.
	StdoutTruncated bool  `json:"stdout_truncated,omitempty"`
	StderrTruncated bool  `json:"stderr_truncated,omitempty"`
	StdoutBytes     int64 `json:"stdout_bytes,omitempty"`
	StderrBytes     int64 `json:"stderr_bytes,omitempty"`
	// Error says, in words, why the command did not end normally: a
	// timeout, a signal, the kernel's out-of-memory killer (in a
	// container at its memory limit), a program that could not be started
	// (the process limit reached, say).
	Error string `json:"error,omitempty"`
}

// Server is an agent's HTTP handler. It is safe for concurrent use.
type Server struct {
	opts Options
	root *os.Root
	log  *slog.Logger

	mu     sync.Mutex
	shims  map[int]*shimProc // by pid, busy or idle
	idle   []*shimProc
	closed bool
	owner  string         // set once (owner.go)
	wg     sync.WaitGroup // the shims' serve

	closeOnce sync.Once
	closeErr  error
}

// New returns a Server over opts.Dir, creating the directory if needed.
// Close it to kill the commands still running.
func New(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("agent: Dir is empty")
	}
	if opts.MaxOutput < 0 || opts.MaxFile < 0 || opts.MaxArchive < 0 {
		return nil, fmt.Errorf("agent: MaxOutput (%d), MaxFile (%d) and MaxArchive (%d) must not be negative", opts.MaxOutput, opts.MaxFile, opts.MaxArchive)
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.MaxFile == 0 {
		opts.MaxFile = DefaultMaxFile
	}
	if opts.MaxArchive == 0 {
		opts.MaxArchive = DefaultMaxArchive
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: work dir: %w", err)
	}
	root, err := os.OpenRoot(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("agent: work dir: %w", err)
	}
	if opts.Env == nil {
		opts.Env = []string{"PATH=" + DefaultPath, "HOME=" + opts.Dir}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Subreaper {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, errors.Join(fmt.Errorf("agent: PR_SET_CHILD_SUBREAPER: %w", err), root.Close())
		}
	}
	return &Server{opts: opts, root: root, log: log, shims: map[int]*shimProc{}}, nil
}

// HeaderDir is the header of every /healthz answer that names the agent's
// work directory (its last element): a process sandbox's provisioner
// checks that the agent on a port is the one it started there.
const HeaderDir = "X-Agent-Dir"

// Handler returns the agent's routes, behind webguard's Host and
// cross-site checks and then the token.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exec", s.exec)
	mux.HandleFunc("GET /files/{path...}", s.readFile)
	mux.HandleFunc("PUT /files/{path...}", s.writeFile)
	mux.HandleFunc("GET /archive", s.exportArchive)
	mux.HandleFunc("PUT /archive", s.importArchive)
	mux.HandleFunc("GET /owner", s.getOwner)
	mux.HandleFunc("PUT /owner", s.setOwner)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(HeaderDir, filepath.Base(s.opts.Dir))
		_, _ = w.Write([]byte("ok\n"))
	})
	var h http.Handler = mux
	if s.opts.Token != "" {
		want := sha256.Sum256([]byte("Bearer " + s.opts.Token))
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Digests compared in constant time: neither the token's
			// bytes nor its length can be found by timing.
			got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 && !(r.Method == http.MethodGet && r.URL.Path == "/healthz") {
				writeError(w, http.StatusUnauthorized, "agent: the backend's token is required")
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	// Outermost: a page's request, or one for a rebinding name, does
	// nothing at all.
	return webguard.Handler(h, webguard.Options{Hosts: s.opts.Hosts, Deny: func(w http.ResponseWriter, _ *http.Request, err error) {
		writeError(w, http.StatusForbidden, "agent: %v", err)
	}})
}

// Close stops every exec — each shim kills its command and every process
// the command started, background ones included — waits until they are
// gone, and refuses new execs. Later calls return the first one's error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		var jobs []*job
		for _, sh := range s.shims {
			if sh.job != nil {
				jobs = append(jobs, sh.job)
			}
		}
		idle := s.idle
		s.idle = nil
		s.mu.Unlock()
		for _, sh := range idle {
			s.retire(sh)
		}
		for _, j := range jobs {
			j.halt(haltClose)
		}
		// Each busy shim says it is free once it has killed its exec's
		// processes, and is retired (or is killed past haltWait).
		s.wg.Wait()
		s.closeErr = s.root.Close()
	})
	return s.closeErr
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req ExecRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 2*MaxCommand))
	err := dec.Decode(&req)
	if err == nil {
		if _, tail := dec.Token(); tail != io.EOF {
			err = errors.New("more after the exec request")
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "exec: body is not one exec request: %v", err)
		return
	}
	if err := CheckCommand(req.Command); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	timeout := DefaultTimeout
	switch {
	case req.TimeoutSec < 0:
		writeError(w, http.StatusBadRequest, "exec: timeout_sec (%v) is negative", req.TimeoutSec)
		return
	case req.TimeoutSec > maxTimeoutSec:
		writeError(w, http.StatusBadRequest, "exec: timeout_sec (%v) is over the limit of %v", req.TimeoutSec, maxTimeoutSec)
		return
	}
	if req.TimeoutSec > 0 {
		timeout = time.Duration(req.TimeoutSec * float64(time.Second))
	}
	res, err := s.Run(r.Context(), req.Command, timeout)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// maxTimeoutSec is the longest timeout_sec a duration holds.
var maxTimeoutSec = math.Floor(float64(math.MaxInt64) / float64(time.Second))

// CheckCommand reports whether command can be run: not empty, a program
// name, no NUL bytes, at most MaxCommand bytes in all.
func CheckCommand(command []string) error {
	if len(command) == 0 || command[0] == "" {
		return errors.New("exec: command is empty")
	}
	n := 0
	for _, a := range command {
		n += len(a) + 1
		if strings.IndexByte(a, 0) >= 0 {
			return errors.New("exec: command has a NUL byte")
		}
	}
	if n > MaxCommand {
		return fmt.Errorf("exec: command is %d bytes, over the limit of %d", n, MaxCommand)
	}
	return nil
}

// oomKills returns how many processes the kernel's out-of-memory killer
// has killed in the memory cgroup mounted at /sys/fs/cgroup — a
// container's own (cgroup v2, or v1's memory controller) — or -1 when
// there is none to read.
func oomKills() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	mu    sync.Mutex
	max   int64
	buf   []byte
	total int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.max - int64(len(c.buf)); room > 0 {
		c.buf = append(c.buf, p[:min(int64(len(p)), room)]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

func (c *capped) truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(len(c.buf))
}

// errorBody is every error reply of the agent and of the backend.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, errorBody{Error: fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
