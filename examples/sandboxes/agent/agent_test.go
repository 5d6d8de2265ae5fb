package agent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func start(t *testing.T, opts agent.Options) (*agent.Client, string) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	srv, err := agent.New(opts)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	tr := agent.Transport()
	t.Cleanup(func() {
		hs.Close()
		tr.CloseIdleConnections()
		require.NoError(t, srv.Close())
	})
	return agent.NewClient(strings.TrimPrefix(hs.URL, "http://"), &http.Client{Transport: tr}, opts.Token), opts.Dir
}

func TestExec(t *testing.T) {
	c, dir := start(t, agent.Options{MaxOutput: 10})
	ctx := context.Background()

	res, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", "echo ok; echo here > f; echo e >&2; exit 4"}})
	require.NoError(t, err)
	assert.Equal(t, "ok\n", res.Stdout)
	assert.Equal(t, "e\n", res.Stderr)
	assert.Equal(t, 4, res.ExitCode)
	assert.FileExists(t, filepath.Join(dir, "f"), "commands run in the work directory")

	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", "printf 0123456789abcdef"}})
	require.NoError(t, err)
	assert.Equal(t, "0123456789", res.Stdout)
	assert.True(t, res.StdoutTruncated)
	assert.Equal(t, int64(16), res.StdoutBytes)
	assert.Contains(t, res.Error, "truncated")

	start := time.Now()
	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", "sleep 30 & sleep 30"}, TimeoutSec: 0.2})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "the whole group dies, the pipes close")
	assert.True(t, res.TimedOut)
	assert.Equal(t, 137, res.ExitCode)

	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"no-such-program-xyz"}})
	require.NoError(t, err)
	assert.Equal(t, 127, res.ExitCode)
	assert.Contains(t, res.Error, "could not start")

	// A background process keeps running; the reply does not wait for it.
	start = time.Now()
	res, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", "sleep 3 & echo started"}})
	require.NoError(t, err)
	assert.Equal(t, "started\n", res.Stdout)
	assert.Less(t, time.Since(start), 2*time.Second)

	// A caller that goes away kills its command.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.Exec(cctx, agent.ExecRequest{Command: []string{"sh", "-c", "echo $$ > pid; sleep 30"}})
	require.Error(t, err)
	require.Eventually(t, func() bool {
		pid, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return false
		}
		_, err = os.Stat("/proc/" + strings.TrimSpace(string(pid)))
		return errors.Is(err, os.ErrNotExist)
	}, 5*time.Second, 10*time.Millisecond)

	var aerr *agent.Error
	_, err = c.Exec(ctx, agent.ExecRequest{Command: nil})
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusBadRequest, aerr.Status)
	_, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"echo", strings.Repeat("x", agent.MaxCommand)}})
	require.ErrorAs(t, err, &aerr)
	assert.Contains(t, aerr.Message, "over the limit")
	// A timeout no duration holds is refused, not wrapped around to a
	// negative one that would kill the command at once.
	_, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"true"}, TimeoutSec: 1e300})
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusBadRequest, aerr.Status)
	assert.Contains(t, aerr.Message, "timeout_sec (1e+300) is over the limit")
	assert.NoError(t, c.Health(ctx))
}

func TestFilesAndArchive(t *testing.T) {
	c, dir := start(t, agent.Options{MaxFile: 100})
	ctx := context.Background()
	_, err := c.WriteFile(ctx, "a/b/c.txt", strings.NewReader("hello"), 5)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "a/b/c.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))

	var aerr *agent.Error
	_, err = c.WriteFile(ctx, "big", bytes.NewReader(make([]byte, 101)), 101)
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusRequestEntityTooLarge, aerr.Status)
	_, err = c.WriteFile(ctx, "big", io.MultiReader(bytes.NewReader(make([]byte, 101))), -1)
	require.ErrorAs(t, err, &aerr)
	assert.NoFileExists(t, filepath.Join(dir, "big"), "an oversized upload leaves nothing")

	// A symbolic link that points out of the work directory is not
	// followed.
	require.NoError(t, os.Symlink("/etc", filepath.Join(dir, "etc")))
	_, err = c.File(ctx, "etc/passwd")
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusBadRequest, aerr.Status, aerr.Message)
	_, err = c.WriteFile(ctx, "etc/evil", strings.NewReader("x"), 1)
	require.Error(t, err)
	_, err = c.File(ctx, "missing")
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusNotFound, aerr.Status)

	// Export, then import into another agent.
	r, err := c.Export(ctx)
	require.NoError(t, err)
	tarball, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	names := map[string]byte{}
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names[h.Name] = h.Typeflag
	}
	assert.Equal(t, map[string]byte{"a/": tar.TypeDir, "a/b/": tar.TypeDir, "a/b/c.txt": tar.TypeReg, "etc": tar.TypeSymlink}, names)

	c2, dir2 := start(t, agent.Options{})
	require.NoError(t, c2.Import(ctx, bytes.NewReader(tarball)))
	got, err = os.ReadFile(filepath.Join(dir2, "a/b/c.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	link, err := os.Readlink(filepath.Join(dir2, "etc"))
	require.NoError(t, err)
	assert.Equal(t, "/etc", link)

	// A hostile archive cannot write outside.
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	_, _ = tw.Write([]byte("x"))
	require.NoError(t, tw.Close())
	err = c2.Import(ctx, &evil)
	require.ErrorAs(t, err, &aerr)
	assert.NoFileExists(t, filepath.Join(filepath.Dir(dir2), "escape"))
}

// With a token, only its holder drives the agent; /healthz stays open for
// the probes.
func TestToken(t *testing.T) {
	c, dir := start(t, agent.Options{Token: "s3cret"})
	ctx := context.Background()
	_, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"true"}})
	require.NoError(t, err, "the client sends it")

	stranger := agent.NewClient(strings.TrimPrefix(c.BaseURL(), "http://"), nil, "wrong")
	var aerr *agent.Error
	_, err = stranger.Exec(ctx, agent.ExecRequest{Command: []string{"sh", "-c", "touch pwned"}})
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusUnauthorized, aerr.Status)
	assert.NoFileExists(t, filepath.Join(dir, "pwned"))
	_, err = agent.NewClient(strings.TrimPrefix(c.BaseURL(), "http://"), nil, "").Export(ctx)
	require.ErrorAs(t, err, &aerr)
	assert.NoError(t, stranger.Health(ctx), "health probes need no token")
	resp, err := http.Get(c.BaseURL() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// Requests for a Host the agent does not answer to (DNS rebinding), and
// those a browser sends for another site, are refused before the token is
// looked at, and run nothing; loopback names, addresses and Options.Hosts
// are answered. A bad -allowed-hosts is an error.
func TestGuard(t *testing.T) {
	c, dir := start(t, agent.Options{Token: "s3cret", Hosts: []string{"agent.test"}})
	post := func(header ...string) (int, string) {
		req, err := http.NewRequest("POST", c.BaseURL()+"/exec", strings.NewReader(`{"command": ["touch", "ran"]}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer s3cret")
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
			} else {
				req.Header.Set(header[i], header[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, h := range [][]string{
		{"Host", "evil.example"},
		{"Host", "agent.test.evil.example:80"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://evil.example"},
	} {
		code, body := post(h...)
		assert.Equal(t, http.StatusForbidden, code, "%v: %s", h, body)
		assert.Contains(t, body, `"error":"agent: `, "%v", h)
		assert.NoFileExists(t, filepath.Join(dir, "ran"), "%v", h)
	}
	for _, h := range [][]string{{"Host", "agent.test:8080"}, {"Host", "localhost"}, {"Host", "10.0.0.7:8080"}} {
		code, body := post(h...)
		assert.Equal(t, http.StatusOK, code, "%v: %s", h, body)
		require.NoError(t, os.Remove(filepath.Join(dir, "ran")), "%v ran", h)
	}

	err := agent.Main(context.Background(), []string{"-dir", t.TempDir(), "-allowed-hosts", "agent.test:8080"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, `-allowed-hosts: "agent.test:8080" is not a host name`)
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{"": ".", "a/../b": "b", "./x": "x"} {
		got, err := agent.CleanPath(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, bad := range []string{"..", "../x", "/etc/passwd", "a/../../x"} {
		_, err := agent.CleanPath(bad)
		assert.Error(t, err, bad)
	}
}
