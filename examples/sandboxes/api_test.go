package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A conversation through the HTTP API on process sandboxes with the state
// in memory: the first exec assigns a warm sandbox, later requests reach
// the same one, files go in and out, bad input gets clear errors, an exec
// past its timeout is killed and reported, output over the limit is cut
// and said so, and at the end nothing is left running.
func TestConversation(t *testing.T) {
	e := newEnv(t)
	in := startIn(t, e.args("-max-output", "1000", "-exec-timeout", "20s", "-grace", "5s")...)

	res := in.sh(t, "c1", "echo hello; echo oops >&2; exit 3").exec(t)
	assert.Equal(t, "hello\n", res.Stdout)
	assert.Equal(t, "oops\n", res.Stderr)
	assert.Equal(t, 3, res.ExitCode)
	assert.False(t, res.TimedOut)
	sb := sandboxOf(t, in, "c1")

	// State: the design's record.
	status, st := in.state(t, "c1")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "idle", st["status"])
	assert.Equal(t, sb, st["container_id"])
	assert.Equal(t, "127.0.0.1", st["host"])
	assert.NotZero(t, st["port"])
	for _, k := range []string{"created_at", "last_active_at", "idle_destroy_at", "lifetime_ends_at"} {
		assert.NotEmpty(t, st[k], k)
	}

	// Files written through the API are the sandbox's files.
	r := call(t, "PUT", in.url("/conversations/c1/files/src/main.py"), strings.NewReader("print('hi')\n"))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Equal(t, "print('hi')\n", in.sh(t, "c1", "cat src/main.py").exec(t).Stdout)
	in.sh(t, "c1", "echo generated > out.txt")
	r = call(t, "GET", in.url("/conversations/c1/files/out.txt"), nil)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "generated\n", string(r.body))
	r = call(t, "GET", in.url("/conversations/c1/files/"), nil)
	assert.Contains(t, string(r.body), `"name":"src","dir":true`)
	r = call(t, "GET", in.url("/conversations/c1/files/nope.txt"), nil)
	assert.Equal(t, http.StatusNotFound, r.status, "%s", r)
	r = call(t, "GET", in.url("/conversations/c1/files/../../etc/passwd"), nil)
	assert.NotEqual(t, http.StatusOK, r.status, "%s", r)
	r = call(t, "GET", in.url("/conversations/c1/files/x%2F..%2F..%2Fetc%2Fpasswd"), nil)
	assert.Equal(t, http.StatusBadRequest, r.status, "%s", r)
	assert.Equal(t, sb, sandboxOf(t, in, "c1"), "every request reaches the same sandbox")

	// A command past its timeout: its whole process group is killed.
	start := time.Now()
	r = call(t, "POST", in.url("/conversations/c1/exec"), execBody(0.5, "sh", "-c", "echo $$ > fg.pid; sleep 30 & wait"))
	res = r.exec(t)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.True(t, res.TimedOut)
	assert.Equal(t, 137, res.ExitCode)
	assert.Contains(t, res.Error, "timed out after 500ms")
	pid := strings.TrimSpace(in.sh(t, "c1", "cat fg.pid").exec(t).Stdout)
	require.NotEmpty(t, pid)
	assert.NoDirExists(t, "/proc/"+pid, "the timed-out command is gone")

	// Output over the limit is cut, counted and reported.
	res = in.sh(t, "c1", "head -c 5000 /dev/zero | tr '\\0' a; echo tail >&2").exec(t)
	assert.Len(t, res.Stdout, 1000)
	assert.True(t, res.StdoutTruncated)
	assert.Equal(t, int64(5000), res.StdoutBytes)
	assert.False(t, res.StderrTruncated)
	assert.Contains(t, res.Error, "truncated")

	// Bad input: a clear error, nothing assigned.
	for _, c := range []struct {
		conv, body string
		status     int
		want       string
	}{
		{"c1", `{"command": []}`, 400, "command is empty"},
		{"c1", `{"command": "ls"}`, 400, `"command": ["sh", "-c", "..."]`},
		{"c1", `{"command": ["ls"], "timeout_sec": 21}`, 400, "over the limit of 20"},
		{"c1", `{"command": ["ls"], "timeout_sec": -1}`, 400, "negative"},
		{"c1", `{"command": ["ls"], "nope": 1}`, 400, "unknown field"},
		{"c1", `{"command": ["echo", "` + strings.Repeat("x", 200<<10) + `"]}`, 400, "over the limit of 131072"},
		{"c1", `{"command": ["echo", "` + strings.Repeat("x", 300<<10) + `"]}`, 413, "over 262144 bytes"},
		{"bad.id!", `{"command": ["ls"]}`, 400, "conversation id"},
		{"c1", `{"command": ["no-such-program"]}`, 200, ""},
	} {
		r := call(t, "POST", in.url("/conversations/"+c.conv+"/exec"), strings.NewReader(c.body))
		require.Equal(t, c.status, r.status, "%.200s: %.300s", c.body, r)
		if c.want != "" {
			assert.Contains(t, r.errorText(t), c.want)
		} else {
			assert.Equal(t, 127, r.exec(t).ExitCode)
		}
	}
	r = call(t, "GET", in.url("/conversations/nobody"), nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, r.errorText(t), "unknown conversation nobody")
	r = call(t, "GET", in.url("/conversations/nobody/files/x"), nil)
	assert.Equal(t, http.StatusNotFound, r.status, "reading files does not create a sandbox")
	r = call(t, "DELETE", in.url("/conversations/nobody"), nil)
	assert.Equal(t, http.StatusNotFound, r.status)

	// A sandbox that dies mid-exec: a clear error, and a new sandbox for
	// the next request.
	r = in.sh(t, "c2", "sleep 0.1; kill -9 "+agentPID+"; sleep 5")
	assert.Equal(t, http.StatusBadGateway, r.status, "%s", r)
	assert.Contains(t, r.errorText(t), "the sandbox died during the request")
	var again string
	require.Eventually(t, func() bool {
		r := in.sh(t, "c2", "pwd")
		if r.status != http.StatusOK {
			return false
		}
		again = r.exec(t).Stdout
		return true
	}, 10*time.Second, 50*time.Millisecond)
	assert.NotEmpty(t, again)

	// DELETE while an exec runs: the sandbox drains (new requests are
	// refused with 503 and Retry-After), the exec finishes, then the
	// sandbox and its files go.
	done := make(chan reply)
	go func() {
		done <- call(t, "POST", in.url("/conversations/c1/exec"), execBody(0, "sh", "-c", "sleep 1; echo finished"))
	}()
	require.Eventually(t, func() bool { _, st := in.state(t, "c1"); return st["status"] == "running" }, 5*time.Second, 10*time.Millisecond)
	deleted := make(chan reply)
	go func() { deleted <- call(t, "DELETE", in.url("/conversations/c1"), nil) }()
	require.Eventually(t, func() bool { _, st := in.state(t, "c1"); return st["status"] == "draining" }, 5*time.Second, 10*time.Millisecond)
	r = in.sh(t, "c1", "true")
	assert.Equal(t, http.StatusServiceUnavailable, r.status)

	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.Contains(t, r.errorText(t), "is being destroyed (draining)")
	inflight := <-done
	assert.Equal(t, "finished\n", inflight.exec(t).Stdout, "the exec in flight finished")
	for _, k := range []string{"stdout", "stderr", "exit_code", "duration_ms"} {
		assert.Contains(t, string(inflight.body), `"`+k+`"`, "the issue's reply")
	}
	assert.Equal(t, http.StatusNoContent, (<-deleted).status)
	status, _ = in.state(t, "c1")
	assert.Equal(t, http.StatusNotFound, status)
	assert.NoFileExists(t, filepath.Join(e.archive, "c1.tar"))
	assert.NotContains(t, e.listed(t), sb)

	// /metrics and /healthz.
	r = call(t, "GET", in.url("/metrics"), nil)
	assert.Contains(t, string(r.body), `sandboxes_destroyed_total{reason="deleted"} 1`)
	assert.Contains(t, string(r.body), `sandboxes_destroyed_total{reason="unhealthy"} 1`)
	assert.Contains(t, string(r.body), `sandboxes_exec_duration_seconds_count{outcome="timeout"} 1`)
	r = call(t, "GET", in.url("/healthz"), nil)
	assert.Equal(t, http.StatusOK, r.status)

	// Stopped alone (state in memory): every sandbox is archived and
	// destroyed, nothing keeps running, no work directory is left.
	require.NoError(t, in.stop())
	assert.Empty(t, e.listed(t))
	assert.FileExists(t, filepath.Join(e.archive, "c2.tar"))
	ents, err := os.ReadDir(e.work)
	require.NoError(t, err)
	assert.Empty(t, ents)
}

// A sandbox that stops answering its health checks (its agent is frozen
// with SIGSTOP) is destroyed and its conversation gets a fresh one. Its
// files cannot be archived (the agent does not answer); the conversation
// keeps the archive of its previous sandbox, if any.
func TestUnhealthyReplaced(t *testing.T) {
	e := newEnv(t)
	in := startIn(t, e.args("-health-interval", "200ms", "-grace", "1s", "-exec-timeout", "5s")...)
	first := sandboxOf(t, in, "h1")
	pid, err := strconv.Atoi(strings.TrimSpace(in.sh(t, "h1", "echo "+agentPID).exec(t).Stdout))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))

	require.Eventually(t, func() bool {
		status, _ := in.state(t, "h1")
		return status == http.StatusNotFound
	}, 15*time.Second, 50*time.Millisecond, "the frozen sandbox is destroyed")
	assert.NoDirExists(t, "/proc/"+strconv.Itoa(pid), "and its process killed")
	assert.NotContains(t, e.listed(t), first)

	second := sandboxOf(t, in, "h1")
	assert.NotEqual(t, first, second)
	r := call(t, "GET", in.url("/metrics"), nil)
	assert.Contains(t, string(r.body), `sandboxes_destroyed_total{reason="unhealthy"} 1`)
	assert.Contains(t, string(r.body), `sandboxes_health_checks_total{result="failed"}`)
	assert.True(t, bytes.Contains(r.body, []byte(`sandboxes_archives_total{result="failed"} 1`)), "a frozen sandbox's files cannot be archived")
}

// The TTLs with the state in memory: an idle conversation loses its
// sandbox after the inactivity TTL, a busy one after the absolute TTL, and
// both get their files back in the next sandbox.
func TestTTLs(t *testing.T) {
	e := newEnv(t)
	in := startIn(t, e.args("-inactivity-ttl", "1s", "-exec-timeout", "500ms", "-absolute-ttl", "4s",
		"-gc-interval", "100ms", "-grace", "500ms")...)
	_, first, err := runIn(t, in, "idle", "echo kept > notes")
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, st := in.state(t, "idle"); return st["status"] == "archived" },
		10*time.Second, 20*time.Millisecond)
	assert.NotContains(t, e.listed(t), first)
	out, second, err := runIn(t, in, "idle", "cat notes")
	require.NoError(t, err)
	assert.Equal(t, "kept", out)
	assert.NotEqual(t, first, second)

	var sbs []string
	for i := 1; len(sbs) < 2; i++ {
		require.Less(t, i, 100, "the busy sandbox outlived its absolute TTL: %v", sbs)
		out, sb, err := runIn(t, in, "busy", "echo x >> log; wc -l < log")
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(i), out)
		if len(sbs) == 0 || sbs[len(sbs)-1] != sb {
			sbs = append(sbs, sb)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := call(t, "GET", in.url("/metrics"), nil)
	assert.Contains(t, string(r.body), `sandboxes_destroyed_total{reason="inactive"}`)
	assert.Contains(t, string(r.body), `sandboxes_destroyed_total{reason="lifetime"}`)
	assert.Contains(t, string(r.body), `sandboxes_restores_total{result="ok"}`)
}

// The API runs any command, so: the key it is given (and /healthz
// without), and agents that answer only the backend.
func TestSecurity(t *testing.T) {
	e := newEnv(t)
	// A Docker sandbox's files are its memory: a work directory the
	// memory limit cannot hold is refused.
	err := run(context.Background(), e.args("-work-size", "400"), func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	require.ErrorContains(t, err, "-work-size (400 MiB) and /tmp (64 MiB) must leave at least 128 MiB of -memory (512 MiB) to the processes")

	in := startIn(t, e.args("-api-key", "k3y")...)
	call := func(header, value string) reply {
		req, err := http.NewRequest("POST", in.url("/conversations/sec/exec"), execBody(0, "echo", "hi"))
		require.NoError(t, err)
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{status: resp.StatusCode, body: b, header: resp.Header}
	}
	r := call("", "")
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	assert.Equal(t, http.StatusForbidden, call("X-Api-Key", "wrong").status)
	assert.Equal(t, "hi\n", call("X-Api-Key", "k3y").exec(t).Stdout)
	assert.Equal(t, "hi\n", call("Authorization", "Bearer k3y").exec(t).Stdout)
	resp, err := http.Get(in.url("/healthz"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get(in.url("/metrics"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// The sandbox's agent refuses anyone without the backend's token.
	req, _ := http.NewRequest("GET", in.url("/conversations/sec"), nil)
	req.Header.Set("X-Api-Key", "k3y")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	agentURL := fmt.Sprintf("http://%v:%v", st["host"], st["port"])
	resp, err = http.Post(agentURL+"/exec", "application/json", execBody(0, "touch", "pwned"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, _ = http.NewRequest("POST", in.url("/conversations/sec/exec"), execBody(0, "ls"))
	req.Header.Set("X-Api-Key", "k3y")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.NotContains(t, string(b), "pwned", "the stranger's command did not run")
}

// Without SANDBOXES_API_KEY the backend makes a key (32 random bytes) and
// prints it as lines to paste into a shell, not in the log's fields; every
// request but /healthz must carry it: 401 without, 403 with another key,
// and nothing happens. With it the backend may listen beyond loopback,
// with a warning that the key crosses the network in clear.
func TestGeneratedKey(t *testing.T) {
	e := newEnv(t)
	in := startIn(t, e.args("-addr", "0.0.0.0:0")...)
	out := in.logs.String()
	key := in.key
	assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, key, "32 bytes, base64url")
	_, port, err := net.SplitHostPort(in.addr)
	require.NoError(t, err)
	assert.Contains(t, out, "\n    export SANDBOXES_API_KEY="+key+"\n"+
		`    curl -H "Authorization: Bearer $SANDBOXES_API_KEY" http://127.0.0.1:`+port+`/conversations/demo/exec -d '{"command": ["echo", "hello"]}'`+"\n")
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "time=") {
			assert.NotContains(t, line, key, "the log's fields do not hold the key")
		}
	}
	assert.Contains(t, out, "reachable beyond this machine over plain HTTP")

	url := "http://127.0.0.1:" + port
	r := send(t, request(t, "POST", url+"/conversations/k/exec", execBody(0, "touch", "ran")))
	assert.Equal(t, http.StatusUnauthorized, r.status, "%s", r)
	assert.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	r = send(t, request(t, "POST", url+"/conversations/k/exec", execBody(0, "touch", "ran"), "X-Api-Key", "not"+key))
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r)
	r = send(t, request(t, "POST", url+"/conversations/k/exec", execBody(0, "touch", "ran"), "Authorization", "Bearer "+key[:42]))
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r)
	r = send(t, request(t, "GET", url+"/conversations/k", nil, "X-Api-Key", key))
	assert.Equal(t, http.StatusNotFound, r.status, "the refused execs assigned no sandbox: %s", r)
	r = send(t, request(t, "GET", url+"/metrics", nil))
	assert.Equal(t, http.StatusUnauthorized, r.status, "/metrics needs the key")
	r = send(t, request(t, "GET", url+"/metrics", nil, "Authorization", "Bearer "+key))
	assert.Equal(t, http.StatusOK, r.status)
	assert.NotContains(t, string(r.body), "sandboxes_exec_duration_seconds_count", "no exec was counted")
	r = send(t, request(t, "GET", url+"/healthz", nil))
	assert.Equal(t, http.StatusOK, r.status, "/healthz needs none")

	r = send(t, request(t, "POST", url+"/conversations/k/exec", execBody(0, "sh", "-c", "ls; touch ran"), "X-Api-Key", key))
	assert.Equal(t, "", r.exec(t).Stdout, "the refused execs ran nothing")
	r = send(t, request(t, "POST", url+"/conversations/k/exec", execBody(0, "ls"), "Authorization", "Bearer "+key))
	assert.Equal(t, "ran\n", r.exec(t).Stdout)
}

// One conversation reaches no other's files through the API, process
// sandboxes included: not with ".." in the file path (as written, or
// encoded), not with an absolute path, not through symbolic links its own
// commands made to the other's work directory, and not with a conversation
// id that is a path. The refusals are 400s, never a redirect that a client
// would follow to the other conversation.
func TestIsolation(t *testing.T) {
	e := newEnv(t)
	in := startIn(t, e.args()...)
	const secret = "only b may read this\n"
	r := call(t, "PUT", in.url("/conversations/iso-b/files/secret.txt"), strings.NewReader(secret))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	bDir := strings.TrimSpace(in.sh(t, "iso-b", "pwd").exec(t).Stdout)
	bID := filepath.Base(bDir)
	res := in.sh(t, "iso-a", fmt.Sprintf("ln -s %s abs && ln -s ../%s rel && ln -s %s/secret.txt file && mkdir -p d && ln -s ../../%s d/up",
		bDir, bID, bDir, bID)).exec(t)
	require.Equal(t, 0, res.ExitCode, "%+v", res)

	enc := strings.ReplaceAll(strings.TrimPrefix(bDir, "/"), "/", "%2F")
	noRedirect := &http.Client{Transport: httpc.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, target := range []string{
		"/conversations/iso-a/files/../" + bID + "/secret.txt",
		"/conversations/iso-a/files/../../iso-b/files/secret.txt",
		"/conversations/iso-a/files/%2e%2e/%2e%2e/iso-b/files/secret.txt",
		"/conversations/iso-a/files/..%2F" + bID + "%2Fsecret.txt",
		"/conversations/iso-a/files/%2e%2e%2F" + bID + "%2Fsecret.txt",
		"/conversations/iso-a/files/x%2F..%2F..%2F" + bID + "%2Fsecret.txt",
		"/conversations/iso-a/files/%2F" + enc + "%2Fsecret.txt",
		"/conversations/iso-a/files//" + strings.TrimPrefix(bDir, "/") + "/secret.txt",
		"/conversations/iso-a/files/abs/secret.txt",
		"/conversations/iso-a/files/abs/",
		"/conversations/iso-a/files/rel/secret.txt",
		"/conversations/iso-a/files/file",
		"/conversations/iso-a/files/d/up/secret.txt",
		"/conversations/..%2Fiso-b/files/secret.txt",
		"/conversations/iso-a%2F..%2Fiso-b/files/secret.txt",
		"/conversations/iso-a/../iso-b/files/secret.txt",
	} {
		for _, method := range []string{"GET", "PUT"} {
			if method == "PUT" && (target == "/conversations/iso-a/files/abs/" || target == "/conversations/iso-a/files/file") {
				continue // names a's own link: below
			}
			req, err := http.NewRequest(method, in.url(target), strings.NewReader("overwritten by a\n"))
			require.NoError(t, err)
			resp, err := noRedirect.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", method, target, b)
			assert.NotContains(t, string(b), "only b", "%s %s", method, target)
		}
	}
	// Writing to a's link replaces the link in a's directory, not what
	// it pointed to.
	r = call(t, "PUT", in.url("/conversations/iso-a/files/file"), strings.NewReader("a's own\n"))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Equal(t, "a's own\n", string(call(t, "GET", in.url("/conversations/iso-a/files/file"), nil).body))
	got, err := os.ReadFile(filepath.Join(bDir, "secret.txt"))
	require.NoError(t, err)
	assert.Equal(t, secret, string(got), "b's file is untouched")
	r = call(t, "GET", in.url("/conversations/iso-b/files/secret.txt"), nil)
	assert.Equal(t, secret, string(r.body), "b reads its own file")
	r = call(t, "GET", in.url("/conversations/iso-a/files/"), nil)
	assert.Equal(t, http.StatusOK, r.status)
	assert.NotContains(t, string(r.body), "secret.txt", "a's listing shows its own files")
}
