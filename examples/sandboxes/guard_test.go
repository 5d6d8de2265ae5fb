package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
)

// execCount returns how many execs the instance has counted, whatever
// their outcome.
func execCount(t *testing.T, in *instance, header ...string) int {
	t.Helper()
	r := send(t, request(t, "GET", in.url("/metrics"), nil, header...))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^sandboxes_exec_duration_seconds_count\{[^}]*\} (\d+)$`).FindAllSubmatch(r.body, -1) {
		v, _ := strconv.Atoi(string(m[1]))
		n += v
	}
	return n
}

// A bad SANDBOXES_ALLOWED_HOSTS or -allowed-hosts is an error that names
// it, and nothing starts.
func TestAllowedHostsInvalid(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"http://ide.example", nil, `SANDBOXES_ALLOWED_HOSTS: "http://ide.example" is not a host name`},
		{"ide.example:8080", nil, `SANDBOXES_ALLOWED_HOSTS: "ide.example:8080" is not a host name`},
		{"ide.example", []string{"-allowed-hosts", "a..b"}, `-allowed-hosts: "a..b" is not a host name`},
	} {
		err := run(context.Background(), e.args(c.args...), func(k string) string {
			return map[string]string{envAllowedHosts: c.env}[k]
		}, strings.NewReader(""), io.Discard, io.Discard)
		require.ErrorContains(t, err, c.want)
	}
	assert.Empty(t, e.listed(t), "nothing started")
}

// Requests for a Host name the system does not answer to — a page's whose
// name its owner now points at 127.0.0.1 (DNS rebinding) — and requests a
// browser marks as another site's are refused by the backend and by an
// agent before anything runs, the right key and token notwithstanding: an
// exec runs nothing, assigns no sandbox and is not counted; /healthz is
// refused too. The names of SANDBOXES_ALLOWED_HOSTS are answered, by the
// backend and by its agents.
func TestWebGuard(t *testing.T) {
	e := newEnv(t)
	const key, token = "k3y", "t0k3n"
	in := startInEnv(t, map[string]string{envAllowedHosts: "sandboxes.test, .corp.test", agent.EnvToken: token}, e.args("-api-key", key)...)
	withKey := []string{"Authorization", "Bearer " + key}
	r := send(t, request(t, "POST", in.url("/conversations/g/exec"), execBody(0, "pwd"), withKey...))
	work := strings.TrimSpace(r.exec(t).Stdout)
	r = send(t, request(t, "GET", in.url("/conversations/g"), nil, withKey...))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	var st struct {
		Host string
		Port int
	}
	require.NoError(t, json.Unmarshal(r.body, &st))
	agentURL := fmt.Sprintf("http://%s:%d", st.Host, st.Port)
	withToken := []string{"Authorization", "Bearer " + token}
	execs := execCount(t, in, withKey...)

	for _, c := range []struct {
		name   string
		header []string
		want   string
	}{
		{"a rebinding name", []string{"Host", "evil.example:8080"}, "does not answer to that host name"},
		{"an allowed name inside another", []string{"Host", "sandboxes.test.evil.example"}, "does not answer to that host name"},
		{"loopback's name inside another", []string{"Host", "localhost.evil.example"}, "does not answer to that host name"},
		{"a cross-site fetch", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Origin", "http://evil.example"}, "requests from other sites are refused"},
		{"a cross-site form", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"}, "requests from other sites are refused"},
		{"a page on another port", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1"}, "requests from other sites are refused"},
		{"a foreign Origin without Sec-Fetch-Site", []string{"Origin", "http://evil.example"}, "requests from other sites are refused"},
		{"a null Origin", []string{"Origin", "null"}, "requests from other sites are refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, target := range []string{"/conversations/g/exec", "/conversations/fresh/exec"} {
				r := send(t, request(t, "POST", in.url(target), execBody(0, "touch", "pwned"), append(c.header, withKey...)...))
				assert.Equal(t, http.StatusForbidden, r.status, "%s: %s", target, r)
				assert.Contains(t, r.errorText(t), c.want)
			}
			for _, target := range []string{"/conversations/g", "/metrics", "/healthz"} {
				r := send(t, request(t, "GET", in.url(target), nil, append(c.header, withKey...)...))
				assert.Equal(t, http.StatusForbidden, r.status, "GET %s: %s", target, r)
			}
			r := send(t, request(t, "POST", agentURL+"/exec", execBody(0, "touch", "pwned-by-agent"), append(c.header, withToken...)...))
			assert.Equal(t, http.StatusForbidden, r.status, "the agent: %s", r)
			assert.Contains(t, r.errorText(t), c.want)
			r = send(t, request(t, "GET", agentURL+"/healthz", nil, c.header...))
			assert.Equal(t, http.StatusForbidden, r.status, "the agent's /healthz: %s", r)

			assert.NoFileExists(t, filepath.Join(work, "pwned"))
			assert.NoFileExists(t, filepath.Join(work, "pwned-by-agent"))
			assert.Equal(t, http.StatusNotFound, send(t, request(t, "GET", in.url("/conversations/fresh"), nil, withKey...)).status,
				"no sandbox for the conversation")
			assert.Equal(t, execs, execCount(t, in, withKey...), "no exec counted")
		})
	}

	// The names configured, loopback names, addresses, and a page of the
	// API's own origin.
	for i, header := range [][]string{
		{"Host", "sandboxes.test"},
		{"Host", "SANDBOXES.test:8080"},
		{"Host", "ide.corp.test"},
		{"Host", "corp.test:443"},
		{"Host", "localhost:8080"},
		{"Host", "[::1]:8080"},
		{"Sec-Fetch-Site", "same-origin", "Origin", "http://" + in.addr},
	} {
		file := "ok" + strconv.Itoa(i)
		r := send(t, request(t, "POST", in.url("/conversations/g/exec"), execBody(0, "touch", file), append(header, withKey...)...))
		assert.Equal(t, 0, r.exec(t).ExitCode, "%v", header)
		assert.FileExists(t, filepath.Join(work, file), "%v", header)
		if header[0] == "Host" {
			r = send(t, request(t, "POST", agentURL+"/exec", execBody(0, "touch", "agent-"+file), append(header, withToken...)...))
			assert.Equal(t, 0, r.exec(t).ExitCode, "the agent: %v", header)
			assert.FileExists(t, filepath.Join(work, "agent-"+file), "the agent: %v", header)
		}
	}
}
