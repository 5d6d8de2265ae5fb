package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/internal/browsertest"
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
