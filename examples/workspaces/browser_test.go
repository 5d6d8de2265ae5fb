package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/workspaces/admin"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
)

// updateScreenshot makes TestBrowser write screenshot.png, the IDE with a
// file open and the terminal used:
//
//	TTLKIT_TEST_CHROMIUM=/usr/bin/chromium go test ./examples/workspaces -run TestBrowser -screenshot
var updateScreenshot = flag.Bool("screenshot", false, "write screenshot.png from a real browser")

// js evaluates expr in the page.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	return browsertest.Eval[T](t, ctx, expr)
}

// waitJS waits until expr is truthy in the page.
func waitJS(t *testing.T, ctx context.Context, expr string) { browsertest.Wait(t, ctx, expr) }

// TestBrowser drives the system in a real Chromium: the admin page creates
// a workspace; its IDE, opened through the proxy with the owner's link,
// saves a file and runs commands in its terminal; the tab left open lets
// the workspace go to STANDBY, which the admin page shows as it happens;
// opening the IDE again brings the workspace back with its file.
func TestBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(browsertest.New(t), 2*time.Minute)
	defer cancel()
	cfg := fastConfig(t)
	cfg.Standby, cfg.Archive = 3*time.Second, time.Hour
	sys := startSystem(t, cfg, Deps{})
	base := "http://" + sys.Addr()

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/admin/?token="+testAdmin),
		chromedp.WaitVisible(chromedp.ID("create")),
		chromedp.SendKeys(chromedp.ID("new-id"), "browser"),
		chromedp.Click(chromedp.CSS(`#create button`)),
		chromedp.WaitVisible(chromedp.ID("created-link")),
	))
	assert.Equal(t, base+"/admin/", js[string](t, ctx, `location.href`), "the token left the address")
	waitJS(t, ctx, `document.querySelector('tr[data-id="browser"]')?.dataset.phase === 'RUNNING'`)
	assert.Contains(t, js[string](t, ctx, `document.querySelector('tr[data-id="browser"] .left').textContent`), "to standby")
	link := js[string](t, ctx, `document.getElementById('created-link').getAttribute('href')`)

	// The owner opens the IDE through the proxy.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+link)))
	waitJS(t, ctx, `document.getElementById('title').textContent === 'browser'`)
	assert.Equal(t, base+"/browser/", js[string](t, ctx, `location.href`))
	waitJS(t, ctx, `document.getElementById('term-state').dataset.state === 'open'`)

	// The editor saves a file over HTTP.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("new-name"), "notes.txt"),
		chromedp.Click(chromedp.CSS(`#new-file button`)),
	))
	waitJS(t, ctx, `document.getElementById('current').textContent === 'notes.txt' && !document.getElementById('editor').disabled`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("editor"), "hello from the browser"),
		chromedp.Click(chromedp.ID("save")),
	))
	waitJS(t, ctx, `document.getElementById('editor').dataset.saved === '1'`)
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, "files", "browser", "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello from the browser", string(b))

	// The terminal echoes keys and runs commands.
	in := sys.proxy.Stats().MessagesIn
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("terminal"), "ls"+kb.Enter)))
	waitJS(t, ctx, `document.getElementById('terminal').textContent.includes('notes.txt')`)
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("terminal"), "cat notes.txt"+kb.Enter)))
	waitJS(t, ctx, `document.getElementById('terminal').textContent.includes('hello from the browser')`)
	assert.GreaterOrEqual(t, sys.proxy.Stats().MessagesIn, in+15, "each key a message, each one activity")
	if *updateScreenshot {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile("screenshot.png", png, 0o644))
		t.Logf("wrote screenshot.png (%d bytes)", len(png))
	}

	// The tab stays open and nobody types: the workspace goes to STANDBY,
	// which closes the terminal.
	waitPhase(t, sys.store, "browser", catalog.Standby, 20*time.Second)
	waitJS(t, ctx, `document.getElementById('term-state').dataset.state === 'closed'`)

	// The admin page shows it, updating by itself.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/admin/")))
	waitJS(t, ctx, `document.querySelector('tr[data-id="browser"]')?.dataset.phase === 'STANDBY'`)
	assert.Contains(t, js[string](t, ctx, `document.querySelector('tr[data-id="browser"] .left').textContent`), "to archive")

	// Opening the IDE again (its cookie is kept) brings the workspace back.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/browser/")))
	waitJS(t, ctx, `document.querySelector('#files li[data-name="notes.txt"]') !== null`)
	assert.Equal(t, catalog.Running, entity(t, sys.store, "browser").Phase)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#files li[data-name="notes.txt"]`))))
	waitJS(t, ctx, `document.getElementById('editor').value === 'hello from the browser'`)
}

// hijack is what a page that opened a workspace's terminal read from it.
type hijack struct {
	Opened bool   `json:"opened"`
	Text   string `json:"text"`
}

// openTerminal has the page of ctx open the terminal at url (ws://...)
// and, if it opens, ask for a file: a WebSocket is no simple request, but
// no CORS rule keeps its answers from the page either.
func openTerminal(t *testing.T, ctx context.Context, url string) hijack {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[hijack](`new Promise(resolve => {
		const out = {opened: false, text: ""};
		const ws = new WebSocket(`+strconv.Quote(url)+`);
		ws.onopen = () => { out.opened = true; ws.send("cat notes.txt\r"); };
		ws.onmessage = e => { out.text += e.data; };
		ws.onclose = () => resolve(out);
		setTimeout(() => { ws.close(); resolve(out); }, 8000);
	})`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	t.Logf("terminal %s from %s: %+v", url, js[string](t, ctx, `location.origin`), got)
	return got
}

// neighbourPage is a page of another server on this machine, at another
// port of 127.0.0.1: the same site as the system's, so the browser sends
// the system's cookies with its requests, SameSite or not. Its functions
// send what Attack's page sends (a no-cors fetch POST of text/plain, a
// text/plain form, an image) and say what became of it.
const neighbourPage = `<!doctype html><title>another local server's page</title><body><script>
window.post = (url, body) => fetch(url, {method: "POST", mode: "no-cors", credentials: "include",
  headers: {"Content-Type": "text/plain"}, body}).then(() => "sent", e => String(e));
window.form = (url, name, value) => new Promise(resolve => {
  const frame = document.createElement("iframe"); frame.name = "f" + Math.random().toString(36).slice(2);
  const form = document.createElement("form"), input = document.createElement("input");
  form.method = "POST"; form.action = url; form.target = frame.name; form.enctype = "text/plain";
  input.type = "hidden"; input.name = name; input.value = value;
  form.append(input); document.body.append(frame, form);
  frame.onload = () => resolve("submitted"); form.submit();
});
window.img = url => new Promise(resolve => { const i = new Image();
  i.onload = () => resolve("loaded"); i.onerror = () => resolve("failed"); i.src = url; });
</script>`

// TestBrowserOtherSites is the owner's own browser, signed in to the admin
// page and holding the cookie of a workspace gone to STANDBY, with a page
// of another site open in a second tab, then a page of another server on
// the same machine. Each sends every request a page can send without a
// preflight (a no-cors fetch POST of text/plain, a form, an image) to save
// a file in the workspace, wake it, create a workspace, get a new link and
// delete one, and opens the workspace's terminal. Then a page under a
// DNS-rebinding name tries the admin page. Nothing takes effect.
func TestBrowserOtherSites(t *testing.T) {
	ctx, cancel := context.WithTimeout(browsertest.New(t), 3*time.Minute)
	defer cancel()
	cfg := fastConfig(t)
	cfg.Standby, cfg.Archive = 2*time.Second, time.Hour
	var logs testenv.Buffer
	sys := startLogged(t, cfg, Deps{}, slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, &logs), nil)))
	base := "http://" + sys.Addr()
	o := create(t, base, "notes")
	waitPhase(t, sys.store, "notes", catalog.Running, 10*time.Second)
	o.save("notes.txt", "private notes")
	var link admin.Created
	require.Equal(t, http.StatusOK, adminCall(t, base, "POST", "workspaces/notes/link", nil, &link))

	// The owner signs in to the admin page and opens the IDE, then leaves
	// it: the workspace goes to STANDBY.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/admin/?token="+testAdmin)))
	waitJS(t, ctx, `document.querySelector('tr[data-id="notes"]') !== null`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+link.URL)))
	waitJS(t, ctx, `document.getElementById('title').textContent === 'notes'`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	asleep := waitPhase(t, sys.store, "notes", catalog.Standby, 20*time.Second)
	records, proxied := sys.tracker.Stats().Records, sys.proxy.Stats()
	logged := len(logs.String())
	terminal := "ws" + strings.TrimPrefix(base, "http") + "/notes/terminal"
	// Split at its first '=' by a text/plain form, this body is still
	// JSON: {"id":"=","id":"evil"}, whose last id counts.
	const createBody = `{"id":"=","id":"evil"}`

	// A page of another site, in a second tab of the same browser. The
	// browser withholds the SameSite cookies from its requests; the
	// system's checks would refuse them all the same.
	evil, cancelEvil := chromedp.NewContext(ctx)
	defer cancelEvil()
	reqs := browsertest.CrossSiteKinds(base+"/notes/api/files/pwned.txt", "pwned=1")
	reqs = append(reqs, browsertest.CrossSiteKinds(base+"/admin/api/workspaces", createBody)...)
	reqs = append(reqs,
		browsertest.Request{Kind: "fetch", Method: "POST", URL: base + "/admin/api/workspaces/notes/link"},
		browsertest.Request{Kind: "form", URL: base + "/admin/api/workspaces/notes/link", Body: "a=b"},
		// A browser does not even send this one without a preflight,
		// which the system never grants; here for completeness.
		browsertest.Request{Kind: "fetch", Method: "DELETE", URL: base + "/admin/api/workspaces/notes"},
		browsertest.Request{Kind: "img", URL: base + "/notes/"},
		browsertest.Request{Kind: "img", URL: base + "/notes/api/files/notes.txt"},
	)
	browsertest.Attack(t, evil, reqs...)
	got := openTerminal(t, evil, terminal)
	assert.False(t, got.Opened, "another site's page did not open the terminal")

	// A page of another server on this machine: the same site, so the
	// browser sends the owner's cookies, even the admin page's
	// SameSite=Strict one. Only the system's checks stand in the way.
	neighbour := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, neighbourPage)
	}))
	defer neighbour.Close()
	require.NoError(t, chromedp.Do(evil, chromedp.Navigate(neighbour.URL)))
	for _, call := range []string{
		`post("/notes/api/files/pwned.txt", "pwned")`,
		`form("/notes/api/files/pwned.txt", "pwned", "1")`,
		`post("/admin/api/workspaces", '{"id":"evil"}')`,
		`form("/admin/api/workspaces", '{"id":"', '","id":"evil"}')`,
		`post("/admin/api/workspaces/notes/link", "")`,
		`img("/notes/")`,
		`img("/notes/api/files/notes.txt")`,
		`img("/admin/api/workspaces")`,
	} {
		call = strings.ReplaceAll(call, `("/`, `("`+base+`/`)
		res, err := chromedp.Run(evil, chromedp.Evaluate[string](call, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		t.Logf("same-site %s: %s", call, res)
	}
	got = openTerminal(t, evil, terminal)
	assert.False(t, got.Opened, "a page of the same site did not open the terminal")
	assert.NotContains(t, got.Text, "private notes")

	e := entity(t, sys.store, "notes")
	assert.Equal(t, catalog.Standby, e.Phase, "still asleep")
	assert.Empty(t, e.DesiredState, "nobody asked it to run")
	assert.Equal(t, asleep.LastActivityAt, e.LastActivityAt)
	assert.Equal(t, records, sys.tracker.Stats().Records, "no activity was recorded")
	after := sys.proxy.Stats()
	assert.Equal(t, proxied.Requests, after.Requests, "no request reached the workspace")
	assert.Equal(t, proxied.WebSockets, after.WebSockets)
	_, err := os.Stat(filepath.Join(cfg.DataDir, "files", "notes", "pwned.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no file was written")
	es, err := sys.store.List(context.Background(), entities.Filter{})
	require.NoError(t, err)
	assert.Len(t, es, 1, "no workspace was created")
	assert.True(t, entity(t, sys.store, "notes").DeletedAt.IsZero(), "none was deleted")
	assert.NotContains(t, logs.String()[logged:], "admin:", "the admin API did nothing")

	// DNS rebinding: a name of the attacker's that now resolves to this
	// machine, so that its page and the system share an origin.
	_, port, _ := strings.Cut(sys.Addr(), ":")
	require.NoError(t, chromedp.Do(evil, chromedp.Navigate("http://rebind.test:"+port+"/admin/")))
	assert.Equal(t, "Unknown address", js[string](t, evil, `document.title`), "the page itself is refused")
	for _, call := range []string{
		`fetch('/admin/api/workspaces', {method: 'POST', headers: {'Authorization': 'Bearer ` + testAdmin + `'}, body: '{"id":"rebound"}'})`,
		`fetch('/notes/api/files/notes.txt', {headers: {'Authorization': 'Bearer ` + o.token + `'}})`,
		`fetch('/metrics')`,
	} {
		status, err := chromedp.Run(evil, chromedp.Evaluate[int](call+`.then(r => r.status)`, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		assert.Equal(t, http.StatusForbidden, status, "even with the tokens: %s", call)
	}
	_, err = sys.store.Get(context.Background(), "rebound")
	assert.Error(t, err, "nothing was created")
	assert.Equal(t, catalog.Standby, entity(t, sys.store, "notes").Phase)
	assert.Equal(t, records, sys.tracker.Stats().Records)

	// The owner's browser held the cookies all along: its own pages work.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/admin/")))
	waitJS(t, ctx, `document.querySelector('tr[data-id="notes"]')?.dataset.phase === 'STANDBY'`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/notes/")))
	waitJS(t, ctx, `document.querySelector('#files li[data-name="notes.txt"]') !== null`)
	waitPhase(t, sys.store, "notes", catalog.Running, 10*time.Second)
}
