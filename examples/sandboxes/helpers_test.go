package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/pool/process"
)

// envRunBackend makes the test binary run the program instead of the tests:
// the backend instances that a test starts as real processes (to kill one
// with SIGKILL). The sandboxes' agents run as "<test binary> agent ...".
const envRunBackend = "SANDBOXES_TEST_RUN"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" || os.Getenv(envRunBackend) == "1" {
		main()
		os.Exit(0)
	}
	// The sandboxes and instances are this race-instrumented binary: the
	// race runtime's 1 s pause at exit would make every stop slow.
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	leakcheck.VerifyTestMain(m)
}

var (
	listenRE = regexp.MustCompile(`(?m)^listening on (\S+)`)
	// keyRE finds the API key a backend made, in the line it prints for
	// a user to paste.
	keyRE = regexp.MustCompile(`(?m)^ +export SANDBOXES_API_KEY=(\S+)$`)
)

func waitListening(t *testing.T, out fmt.Stringer, exited <-chan error) string {
	t.Helper()
	deadline := time.After(3 * time.Minute) // the first Docker run builds the image
	for {
		if m := listenRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-exited:
			t.Fatalf("exited before listening: %v\n%s", err, out)
		case <-deadline:
			t.Fatalf("not listening after 3 minutes\n%s", out)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// env is a test system's setup: its label, directories and flags.
type env struct {
	label, archive, work string
}

func newEnv(t *testing.T) env {
	dir := t.TempDir()
	label := "sbtest-" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), ""))
	if len(label) > 40 {
		label = label[:40]
	}
	e := env{label: label, archive: filepath.Join(dir, "archive"), work: filepath.Join(dir, "work")}
	t.Cleanup(func() { e.killLeftovers(t) })
	return e
}

func (e env) args(extra ...string) []string {
	return append([]string{"-addr", "127.0.0.1:0", "-label", e.label, "-archive", e.archive, "-work-root", e.work, "-log-level", "warn"}, extra...)
}

// listed returns the live agents of this test's system.
func (e env) listed(t *testing.T) []string {
	t.Helper()
	p, err := process.New(process.Options{Command: []string{"true"}, Label: e.label})
	require.NoError(t, err)
	ws, err := p.List(context.Background())
	require.NoError(t, err)
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	return ids
}

// killLeftovers kills what a failed test left running, so that it does
// not disturb the next ones.
func (e env) killLeftovers(t *testing.T) {
	p, err := process.New(process.Options{Command: []string{"true"}, Label: e.label, StopGrace: time.Second})
	if err != nil {
		return
	}
	ws, _ := p.List(context.Background())
	for _, w := range ws {
		t.Logf("killing leftover sandbox %s", w.ID)
		_ = p.Destroy(context.Background(), w.Value)
	}
}

// instance is one running backend.
type instance struct {
	addr string
	key  string // its API key: -api-key, or the one it printed
	logs fmt.Stringer
	stop func() error // SIGTERM (or its in-process equivalent) and wait
	kill func()       // SIGKILL (a process of its own only)
}

// startIn runs the whole program in this process, with an empty
// environment; it is stopped when the test ends unless the test stopped
// it.
func startIn(t *testing.T, args ...string) *instance {
	t.Helper()
	return startInEnv(t, nil, args...)
}

// startInEnv is startIn with the environment variables env.
func startInEnv(t *testing.T, env map[string]string, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close() })
	logs := &fileLog{path: out.Name()}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(""), out, out)
	}()
	in := &instance{logs: logs}
	in.addr = waitListening(t, logs, errc)
	in.useKey(t, args)
	var once sync.Once
	in.stop = func() error {
		once.Do(func() {
			cancel()
			err = <-errc
		})
		return err
	}
	t.Cleanup(func() {
		require.NoError(t, in.stop(), "logs:\n%s", logs)
		if t.Failed() {
			t.Logf("logs of %s:\n%s", in.addr, logs)
		}
	})
	return in
}

// startProc runs the program as a process of its own (this test binary,
// re-executed), so that a test can kill it with SIGKILL. Its output goes to
// a file: the sandboxes it starts inherit it, and outlive it.
func startProc(t *testing.T, args ...string) *instance {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunBackend+"=1")
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	out := &fileLog{path: f.Name()}
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	in := &instance{logs: out}
	in.addr = waitListening(t, out, exited)
	in.useKey(t, args)
	var once sync.Once
	in.stop = func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			err = <-exited
		})
		return err
	}
	in.kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
			err = nil
		})
	}
	t.Cleanup(func() {
		require.NoError(t, in.stop(), "logs:\n%s", out)
		if t.Failed() {
			t.Logf("logs of %s:\n%s", in.addr, out)
		}
	})
	return in
}

// useKey finds the instance's API key — the one its arguments give, else
// the one it printed, as a user reads it — and has httpc send it to the
// instance.
func (in *instance) useKey(t *testing.T, args []string) {
	t.Helper()
	for i, a := range args {
		if a == "-api-key" && i+1 < len(args) {
			in.key = args[i+1]
		}
	}
	if in.key == "" {
		m := keyRE.FindStringSubmatch(in.logs.String())
		require.NotNil(t, m, "the backend printed no key to paste:\n%s", in.logs)
		in.key = m[1]
	}
	keys.Store(in.addr, in.key)
	t.Cleanup(func() { keys.Delete(in.addr) })
}

// keys holds the API key of each running instance by its address.
var keys sync.Map

// withKeys sends a request to an instance with the instance's key, unless
// the request carries a key of its own.
type withKeys struct{ next http.RoundTripper }

func (k withKeys) RoundTrip(req *http.Request) (*http.Response, error) {
	if key, ok := keys.Load(req.URL.Host); ok && req.Header.Get("Authorization") == "" && req.Header.Get("X-Api-Key") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+key.(string))
	}
	return k.next.RoundTrip(req)
}

// fileLog reads a program's output from its file.
type fileLog struct{ path string }

func (f *fileLog) String() string {
	b, _ := os.ReadFile(f.path)
	return string(b)
}

// reply is an HTTP reply of the backend.
type reply struct {
	status int
	body   []byte
	header http.Header
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

func (r reply) exec(t *testing.T) agent.ExecResult {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	var res agent.ExecResult
	require.NoError(t, json.Unmarshal(r.body, &res))
	return res
}

func (r reply) errorText(t *testing.T) string {
	t.Helper()
	var e struct{ Error string }
	require.NoError(t, json.Unmarshal(r.body, &e), "%s", r)
	return e.Error
}

// httpc is the tests' client of the backends: it sends each its key.
var httpc = &http.Client{Timeout: 2 * time.Minute, Transport: withKeys{http.DefaultTransport}}

func call(t *testing.T, method, url string, body io.Reader) reply {
	t.Helper()
	r, err := tryCall(method, url, body)
	require.NoError(t, err)
	return r
}

func tryCall(method, url string, body io.Reader) (reply, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return reply{}, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, header: resp.Header}, err
}

// send sends req as it is, with nothing added, and returns the reply.
func send(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := bare.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, body: b, header: resp.Header}
}

var bare = &http.Client{Timeout: 2 * time.Minute}

// request returns a request of method for url with body and the headers
// given as name, value pairs ("Host" sets the request's Host).
func request(t *testing.T, method, url string, body io.Reader, header ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	return req
}

func execBody(timeout float64, command ...string) io.Reader {
	b, _ := json.Marshal(map[string]any{"command": command, "timeout_sec": timeout})
	return bytes.NewReader(b)
}

// agentPID is, in a command's shell, the pid of its sandbox's agent: the
// parent of the command's parent, its exec's shim.
const agentPID = "$(cut -d' ' -f4 /proc/$PPID/stat)"

// sh runs a shell script in conv's sandbox through the instance.
func (in *instance) sh(t *testing.T, conv, script string) reply {
	t.Helper()
	return call(t, "POST", in.url("/conversations/"+conv+"/exec"), execBody(0, "sh", "-c", script))
}

func (in *instance) url(path string) string { return "http://" + in.addr + path }

// state returns GET /conversations/{conv} as a map.
func (in *instance) state(t *testing.T, conv string) (int, map[string]any) {
	t.Helper()
	r := call(t, "GET", in.url("/conversations/"+conv), nil)
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "%s", r)
	return r.status, m
}

// sandboxOf returns the sandbox serving conv, by its work directory's
// name (process sandboxes: Root/<id>).
func sandboxOf(t *testing.T, in *instance, conv string) string {
	t.Helper()
	res := in.sh(t, conv, "pwd").exec(t)
	return filepath.Base(strings.TrimSpace(res.Stdout))
}

// marks returns n sleep durations, in seconds, that no other process
// uses: a test finds its processes in /proc by them.
func marks(n int) []string {
	base := 100000 + rand.IntN(800000)
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(base + i)
	}
	return out
}

// sleeping returns those of marks that a live "sleep <mark>" process has
// (a zombie's command line is empty).
func sleeping(marks []string) []string {
	want := map[string]bool{}
	for _, m := range marks {
		want[m] = true
	}
	var alive []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) >= 2 && filepath.Base(args[0]) == "sleep" && want[args[1]] {
			alive = append(alive, args[1])
		}
	}
	return alive
}

// treeScript leaves a process each way a command can detach from its
// process group or its parent — in a session of its own (setsid), double
// forked ("(cmd &)"), and a setsid'ed shell's own child — and then sleeps
// itself. Each touches a file as it starts; the script touches "ready"
// once they all have, before its own sleep. It takes five marks.
func treeScript(m []string) string {
	return fmt.Sprintf(`setsid sh -c 'touch s1; exec sleep %s' &
(sh -c 'touch s2; exec sleep %s' &)
sh -c "setsid sh -c 'sleep %s & touch s3; exec sleep %s' &"
until [ -e s1 ] && [ -e s2 ] && [ -e s3 ]; do sleep 0.01; done
touch ready
sleep %s`, m[0], m[1], m[2], m[3], m[4])
}

// gone waits a little for the kernel, then asserts that no process of
// marks is left.
func gone(t *testing.T, marks []string, why string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for len(sleeping(marks)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Empty(t, sleeping(marks), "%s: these sleeps are still alive", why)
}
