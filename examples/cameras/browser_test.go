package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
	"github.com/ttlkit/ttlkit/lease"
)

// updateScreenshot regenerates screenshot.png:
//
//	TTLKIT_TEST_CHROMIUM=/usr/bin/chromium go test ./examples/cameras -run TestScreenshot -screenshot
var updateScreenshot = flag.Bool("screenshot", false, "write screenshot.png from a real browser")

// newBrowser starts a fresh headless Chromium for the test (see
// internal/browsertest) whose tab prefers Japanese, the language of the
// design's texts these tests check.
func newBrowser(t *testing.T) context.Context {
	ctx := browsertest.New(t)
	setLanguage(t, ctx, "ja")
	return ctx
}

// setLanguage makes the tab of ctx prefer acceptLanguage (an
// Accept-Language value), as a browser set up for it would: in its
// requests and in navigator.languages.
func setLanguage(t *testing.T, ctx context.Context, acceptLanguage string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, preferLanguage(acceptLanguage)))
}

// preferLanguage is the action of setLanguage.
func preferLanguage(acceptLanguage string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(c context.Context, _ *chromedp.Target) error {
		v, err := chromedp.CallBrowser(c, browser.GetVersion, cdp.Empty{})
		if err != nil {
			return err
		}
		_, err = chromedp.Call(c, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: v.UserAgent, AcceptLanguage: acceptLanguage})
		return err
	})
}

// browserServer starts an instance for a browser, with real pictures.
func browserServer(t *testing.T, cfg Config) (*Server, *fakeLoad, string) {
	t.Helper()
	srv, load, url := serve(t, cfg, Backend{})
	srv.streams.frames.draw = drawFrame
	return srv, load, url
}

// fastConfig heartbeats every second with a 3 s grace, so a test sees
// several heartbeats and a lapse in seconds.
func fastConfig() Config {
	c := testConfig()
	c.HeartbeatInterval = time.Second
	c.HeartbeatGrace = 3 * time.Second
	return c
}

// js evaluates expr in the page.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	return browsertest.Eval[T](t, ctx, expr)
}

// waitJS waits until expr is truthy in the page.
func waitJS(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	require.NoError(t, err, "waiting for %s; modal state %q", expr, js[string](t, ctx, `document.getElementById('modal').dataset.state || ''`))
}

// openCamera loads the page and clicks a camera.
func openCamera(t *testing.T, ctx context.Context, url, cam string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`[data-camera="`+cam+`"]`)),
		chromedp.Click(chromedp.CSS(`[data-camera="`+cam+`"]`)),
	))
}

// setMinimized minimizes or restores the tab's window: a minimized window's
// page is hidden, as a tab in the background is.
func setMinimized(t *testing.T, ctx context.Context, minimized bool) {
	t.Helper()
	state := browser.WindowStateNormal
	if minimized {
		state = browser.WindowStateMinimized
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.Func(func(c context.Context, _ *chromedp.Target) error {
		w, err := chromedp.CallBrowser(c, browser.GetWindowForTarget, browser.GetWindowForTargetParams{TargetID: chromedp.FromContext(c).Target.TargetID})
		if err != nil {
			return err
		}
		_, err = chromedp.CallBrowser(c, browser.SetWindowBounds, browser.SetWindowBoundsParams{WindowID: w.WindowID, Bounds: &browser.Bounds{WindowState: state}})
		return err
	})))
}

func units(t *testing.T, srv *Server) int {
	u, err := usageOf(context.Background(), srv.leases)
	require.NoError(t, err)
	return u.Units
}

// TestBrowser drives the page in a real Chromium: the design's UI (§9).
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	// Each subtest has its own server, so its own origin and session.

	t.Run("a camera's modal streams, heartbeats and releases on close", func(t *testing.T) {
		srv, _, url := browserServer(t, fastConfig())
		openCamera(t, ctx, url, "cam_2f_19")
		waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'streaming'`)
		assert.Equal(t, 2, units(t, srv), "a main stream: 2 units")
		assert.Equal(t, "main", js[string](t, ctx, `document.getElementById('modal-quality').dataset.quality`))
		// The stream plays: the image is the main stream's size, and frames
		// keep arriving.
		waitJS(t, ctx, `document.getElementById('modal-stream').naturalWidth === 960`)
		before := srv.streams.framesSent.Load()
		// At the stream's rate that is well under a second; a loaded
		// machine may take longer, but frames must keep coming.
		assert.Eventually(t, func() bool { return srv.streams.framesSent.Load() > before+3 },
			20*time.Second, 20*time.Millisecond, "frames flow")
		assert.EqualValues(t, 1, srv.streams.activeMain.Load())
		// Heartbeats arrive, every second here.
		waitJS(t, ctx, `Number(document.getElementById('modal').dataset.heartbeats) >= 3`)
		assert.GreaterOrEqual(t, srv.leases.Stats().Heartbeats, uint64(3))
		assert.Contains(t, js[string](t, ctx, `document.getElementById('modal-remaining').textContent`), "残り 4:")
		// Closing the modal releases the lease and ends the stream.
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("modal-close"))))
		require.Eventually(t, func() bool { return units(t, srv) == 0 }, 5*time.Second, 20*time.Millisecond)
		require.Eventually(t, func() bool { return srv.streams.activeMain.Load() == 0 }, 5*time.Second, 20*time.Millisecond)
		assert.EqualValues(t, 1, srv.leases.Stats().Released)
		assert.True(t, js[bool](t, ctx, `document.getElementById('modal').hidden`))
	})

	t.Run("hiding the page releases the lease", func(t *testing.T) {
		srv, _, url := browserServer(t, fastConfig())
		openCamera(t, ctx, url, "cam_1f_02")
		waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'streaming'`)
		first := js[string](t, ctx, `document.getElementById('modal').dataset.leaseId`)
		require.Equal(t, 2, units(t, srv))
		setMinimized(t, ctx, true)
		require.Eventually(t, func() bool { return units(t, srv) == 0 }, 5*time.Second, 20*time.Millisecond, "released when hidden")
		assert.EqualValues(t, 1, srv.leases.Stats().Released, "by a DELETE, not by lapsing")
		require.Eventually(t, func() bool { return srv.streams.activeMain.Load() == 0 }, 5*time.Second, 20*time.Millisecond)
		setMinimized(t, ctx, false)
		waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'hidden' && !document.getElementById('ttl-dialog').hidden`)
		// 再接続 asks for a new lease.
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("reconnect"))))
		waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'streaming'`)
		assert.NotEqual(t, first, js[string](t, ctx, `document.getElementById('modal').dataset.leaseId`))
		assert.Equal(t, 2, units(t, srv))
	})

	t.Run("the TTL dialog offers 再接続 and 閉じる", func(t *testing.T) {
		cfg := fastConfig()
		cfg.ModalTTL = 4 * time.Second
		srv, _, url := browserServer(t, cfg)
		openCamera(t, ctx, url, "cam_3f_05")
		waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'streaming'`)
		waitJS(t, ctx, `!document.getElementById('ttl-dialog').hidden && document.getElementById('ttl-dialog').dataset.kind === 'ttl'`)
		assert.Equal(t, "表示時間が終了しました", js[string](t, ctx, `document.getElementById('ttl-title').textContent`))
		assert.Equal(t, "続けて表示しますか？", js[string](t, ctx, `document.getElementById('ttl-message').textContent`))
		assert.Equal(t, "再接続", js[string](t, ctx, `document.getElementById('reconnect').textContent`))
		assert.Equal(t, "閉じる", js[string](t, ctx, `document.getElementById('close-dialog').textContent`))
		require.Eventually(t, func() bool { return srv.streams.activeMain.Load() == 0 }, 5*time.Second, 20*time.Millisecond, "the stream ended with the TTL")
		assert.Zero(t, units(t, srv))
		// 再接続: a new lease and the stream again.
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("reconnect"))))
		waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'streaming'`)
		assert.Equal(t, 2, units(t, srv))
		assert.EqualValues(t, 2, srv.leases.Stats().Granted)
		// 閉じる, at the next TTL: the modal closes.
		waitJS(t, ctx, `!document.getElementById('ttl-dialog').hidden`)
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("close-dialog"))))
		waitJS(t, ctx, `document.getElementById('modal').hidden`)
		assert.Zero(t, units(t, srv))
	})

	t.Run("OVER_CAPACITY and SYSTEM_OVERLOAD are shown in the modal", func(t *testing.T) {
		srv, load, url := browserServer(t, fastConfig())
		for range 17 { // other sessions hold 34 units, then 35
			overHTTP(t, url).mustGrant("cam_gate", "main")
		}
		overHTTP(t, url).mustGrant("cam_gate", "sub")
		openCamera(t, ctx, url, "cam_2f_19")
		waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'rejected'`)
		assert.Equal(t, CodeOverCapacity, js[string](t, ctx, `document.getElementById('modal-message').dataset.code`))
		assert.Contains(t, js[string](t, ctx, `document.getElementById('modal-message').textContent`), MsgOverCapacity)
		assert.False(t, js[bool](t, ctx, `document.getElementById('modal-message').hidden`))
		assert.EqualValues(t, 0, srv.streams.activeMain.Load()+srv.streams.activeSub.Load())

		load.set(97, 40)
		_, err := srv.monitor.Step(t.Context())
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("modal-close"))))
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-camera="cam_1f_01"]`))))
		waitJS(t, ctx, `document.getElementById('modal-message').dataset.code === 'SYSTEM_OVERLOAD'`)
		assert.Contains(t, js[string](t, ctx, `document.getElementById('modal-message').textContent`), MsgSystemOverload)
		waitJS(t, ctx, `document.getElementById('health').textContent === '高負荷'`)
	})
}

// TestScreenshot writes screenshot.png, the page with a modal open, when
// run with -screenshot (see updateScreenshot).
func TestScreenshot(t *testing.T) {
	if !*updateScreenshot {
		t.Skip("run with -screenshot to regenerate screenshot.png")
	}
	ctx := newBrowser(t)
	srv, load, url := browserServer(t, testConfig())
	load.set(31.4, 46.2)
	_, err := srv.monitor.Step(t.Context())
	require.NoError(t, err)
	// A little history for the status panel: 30 minutes of rows.
	now := time.Now()
	for i := range 180 {
		active := 8 + (i/6)%14
		rej := 0
		if active > 18 {
			rej = i % 3
		}
		require.NoError(t, srv.history.Record(t.Context(), Row{RecordedAt: now.Add(time.Duration(i-180) * 10 * time.Second),
			ActiveModals: active, ActiveSuggest: true, CPUPercent: 30, MemoryPercent: 46, RequestsTotal: 3, RejectionsTotal: rej}))
	}
	for i := range 9 {
		overHTTP(t, url).mustGrant(fmt.Sprintf("cam_1f_0%d", 1+i%4), []string{"main", "sub"}[i%2])
	}
	openCamera(t, ctx, url, "cam_2f_19")
	waitJS(t, ctx, `document.getElementById('modal-stream').naturalWidth === 960`)
	waitJS(t, ctx, `[...document.querySelectorAll('.tile img')].every(i => i.naturalWidth > 0)`)
	waitJS(t, ctx, `document.getElementById('spark').dataset.points > 0`)
	time.Sleep(1500 * time.Millisecond)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("screenshot.png", png, 0o644))
	t.Logf("wrote screenshot.png (%d bytes)", len(png))
}

// TestBrowserOtherSites is the user's own browser, with the camera page open
// and a modal streaming, visiting a page of another site that sends every
// request a page can send without a preflight — a no-cors fetch POST of
// text/plain, a form, an image — to take a lease and to be counted as a UI
// user; then a page under a DNS-rebinding name (a name that reaches the
// server, whose requests look same-origin to the browser). Nothing of it
// takes effect.
func TestBrowserOtherSites(t *testing.T) {
	ctx := newBrowser(t)
	srv, _, url := browserServer(t, fastConfig())
	openCamera(t, ctx, url, "cam_2f_19")
	waitJS(t, ctx, `document.getElementById('modal').dataset.state === 'streaming'`)
	leases, err := srv.leaseStore.List(t.Context())
	require.NoError(t, err)
	require.Len(t, leases, 1, "the user's own modal")
	users := srv.sessions.Active()
	holders := func(ls []lease.Lease) (out []string) {
		for _, l := range ls {
			out = append(out, l.ID+" "+l.Holder+" "+l.Resource)
		}
		return out
	}

	// The other site opens in a second tab of the same browser, so the
	// modal's tab goes on heartbeating and shares its cookies.
	evil, cancel := chromedp.NewContext(ctx)
	defer cancel()
	grant := `{"camera_id":"cam_1f_01","quality":"sub"}`
	reqs := browsertest.CrossSiteKinds(url+"/api/modal/lease", grant)
	reqs = append(reqs,
		browsertest.Request{Kind: "img", URL: url + "/api/system/status"},
		browsertest.Request{Kind: "img", URL: url + "/stream/suggest"},
		browsertest.Request{Kind: "fetch", Method: "POST", URL: url + "/api/modal/lease/" + leases[0].ID + "/heartbeat"},
	)
	browsertest.Attack(t, evil, reqs...)
	after, err := srv.leaseStore.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, holders(leases), holders(after), "no lease taken; the user's is still there")
	assert.Equal(t, users, srv.sessions.Active(), "no UI user counted for the other site")

	// DNS rebinding: the attacker's name now resolves to this machine, so
	// its page and the server share an origin.
	port := url[strings.LastIndex(url, ":")+1:]
	require.NoError(t, chromedp.Do(evil, chromedp.Navigate("http://rebind.test:"+port+"/")))
	status, err := chromedp.Run(evil, chromedp.Evaluate[int](`fetch('/api/modal/lease', {method: 'POST',
		headers: {'Content-Type': 'application/json'}, body: JSON.stringify({camera_id: 'cam_1f_01', quality: 'sub'})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	assert.Equal(t, 403, status)
	body := js[string](t, evil, `document.body.innerText`)
	assert.Contains(t, body, CodeUnknownHost, "the page itself was refused")
	after, err = srv.leaseStore.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, holders(leases), holders(after), "no lease through the rebinding name")
	assert.Equal(t, users, srv.sessions.Active())
}
