package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
)

// A real browser, on a page of another site, sends each request a page can
// make it send without the user's consent and without a preflight — a
// no-cors fetch POST of text/plain, a text/plain form, an image — to the
// backend's exec endpoint and to an agent's, with a command that would
// create a file: the file is never created, no exec is counted, and no
// sandbox is assigned. (The same body from a client that is not a browser,
// with the key, does create the file: the page's requests were well
// formed.)
func TestBrowserAttack(t *testing.T) {
	ctx := browsertest.New(t)
	e := newEnv(t)
	const token = "t0k3n"
	in := startInEnv(t, map[string]string{agent.EnvToken: token}, e.args()...)
	withKey := []string{"Authorization", "Bearer " + in.key}

	in.sh(t, "victim", "true").exec(t)
	r := send(t, request(t, "GET", in.url("/conversations/victim"), nil, withKey...))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	var st struct {
		Host string
		Port int
	}
	require.NoError(t, json.Unmarshal(r.body, &st))
	agentExec := fmt.Sprintf("http://%s:%d/exec", st.Host, st.Port)

	// A text/plain form sends "name=value\r\n", its one field split at
	// the body's first '=': the command's own "x=1", so that the form's
	// body is the JSON too.
	marker := filepath.Join(t.TempDir(), "marker")
	body := fmt.Sprintf(`{"command":["sh","-c","x=1; touch %s"]}`, marker)
	execs := execCount(t, in, withKey...)
	browsertest.Attack(t, ctx, append(browsertest.CrossSiteKinds(in.url("/conversations/attacked/exec"), body),
		browsertest.CrossSiteKinds(agentExec, body)...)...)

	assert.NoFileExists(t, marker, "no request of the page ran its command")
	assert.Equal(t, execs, execCount(t, in, withKey...), "no exec was counted")
	r = send(t, request(t, "GET", in.url("/conversations/attacked"), nil, withKey...))
	assert.Equal(t, http.StatusNotFound, r.status, "no sandbox was assigned to the page's conversation: %s", r)

	for _, target := range []struct {
		url    string
		header []string
	}{
		{in.url("/conversations/attacked/exec"), withKey},
		{agentExec, []string{"Authorization", "Bearer " + token}},
	} {
		r := send(t, request(t, "POST", target.url, strings.NewReader(body+"\r\n"), append(target.header, "Content-Type", "text/plain")...))
		assert.Equal(t, 0, r.exec(t).ExitCode)
		assert.FileExists(t, marker, "the form's body, with the key, from no browser: %s", target.url)
		require.NoError(t, os.Remove(marker))
	}
}
