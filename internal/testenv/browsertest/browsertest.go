// Package browsertest starts the real browser that the examples' page tests
// drive (chromedp over a headless Chromium), with the policy of
// internal/testenv: TTLKIT_TEST_CHROMIUM names the binary; unset skips the
// test, or fails it when TTLKIT_REQUIRE_BACKENDS=1.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ttlkit/ttlkit/internal/testenv"
)

// EnvChromium names the browser binary the browser tests drive.
const EnvChromium = "TTLKIT_TEST_CHROMIUM"

// New starts a fresh headless Chromium (its own profile, no sandbox, no
// GPU, no background traffic, every name under .test resolved to
// 127.0.0.1) for the test and returns a context for its
// first tab. The browser is stopped when the test ends.
func New(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv(EnvChromium)
	if path == "" {
		if testenv.Required() {
			t.Fatalf("%s is not set (and %s=1)", EnvChromium, testenv.EnvRequire)
		}
		t.Skipf("%s is not set", EnvChromium)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Every name under .test is this machine, so a test can serve a
		// page from another site (see Attack).
		chromedp.Flag("host-resolver-rules", "MAP *.test 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// Eval evaluates expr in the page and returns its value, failing the test
// if it cannot.
func Eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Wait waits up to 20 s until expr is truthy in the page, failing the test
// if it never is.
func Wait(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	if err := poll(ctx, expr, 20*time.Second); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// poll evaluates expr every 50 ms until it is true or timeout passes. An
// evaluation that fails is tried again: the page's execution context can be
// replaced under an evaluation (a frame navigating, the browser busy), which
// says nothing about expr.
func poll(ctx context.Context, expr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("("+expr+") === true"))
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("not true after %v (last evaluation: %w)", timeout, last)
			}
			return fmt.Errorf("not true after %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
