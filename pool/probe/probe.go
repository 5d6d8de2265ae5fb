// Package probe waits for a freshly started server to become ready and
// checks that a running one still answers: a TCP connect, an HTTP GET that
// must answer 2xx, or any function, retried with exponential backoff until a
// deadline.
//
// A pool.Provisioner's Create calls Wait after starting a worker; its Check
// calls a Func once:
//
//	ready := probe.HTTP("http://" + addr + "/healthz")
//	if err := probe.Wait(ctx, ready, probe.Options{Timeout: 30 * time.Second}); err != nil {
//		// kill the worker: it never became ready
//	}
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Defaults of the Options fields left zero.
const (
	defaultTimeout        = 30 * time.Second
	defaultAttemptTimeout = 2 * time.Second
	defaultInterval       = 10 * time.Millisecond
	defaultMaxInterval    = 500 * time.Millisecond
)

var (
	// ErrInvalid matches every error about bad options or arguments.
	ErrInvalid = errors.New("probe: invalid argument")
	// ErrNotReady matches the error Wait returns when its Timeout passes
	// before an attempt succeeds.
	ErrNotReady = errors.New("probe: not ready")
)

// Func is one readiness or health check: nil when the target is ready.
// It must return when ctx ends.
type Func func(ctx context.Context) error

// TCP returns a Func that succeeds when a TCP connection to addr
// ("host:port") can be opened; it closes the connection at once.
func TCP(addr string) Func {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// HTTP returns a Func that succeeds when a GET of url answers with a 2xx
// status. It uses a client that does not follow redirects, so a 3xx is a
// failure, and reads at most 4 KiB of the body to reuse the connection.
func HTTP(url string) Func {
	client := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// Options tunes Wait. The zero value means the defaults.
type Options struct {
	// Timeout bounds the whole wait. Zero means 30 seconds.
	Timeout time.Duration
	// AttemptTimeout bounds one attempt. Zero means 2 seconds.
	AttemptTimeout time.Duration
	// Interval is the pause after the first failed attempt; it doubles
	// after each failure up to MaxInterval. Zero means 10 milliseconds.
	Interval time.Duration
	// MaxInterval caps the pause. Zero means 500 milliseconds.
	MaxInterval time.Duration
}

// Validate returns an error naming the first field that is out of range,
// as Wait would.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

func (o Options) withDefaults() (Options, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", o.Timeout}, {"AttemptTimeout", o.AttemptTimeout}, {"Interval", o.Interval}, {"MaxInterval", o.MaxInterval}} {
		if f.v < 0 {
			return o, errs.Invalid(ErrInvalid, "probe: %s (%v) is negative", f.name, f.v)
		}
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = defaultAttemptTimeout
	}
	if o.Interval == 0 {
		o.Interval = defaultInterval
	}
	if o.MaxInterval == 0 {
		o.MaxInterval = defaultMaxInterval
	}
	if o.MaxInterval < o.Interval {
		return o, errs.Invalid(ErrInvalid, "probe: MaxInterval (%v) < Interval (%v)", o.MaxInterval, o.Interval)
	}
	return o, nil
}

// Wait runs f until it succeeds, pausing between attempts with exponential
// backoff. When Timeout passes first it returns an error matching
// ErrNotReady that carries the attempt count and the last attempt's error;
// when ctx ends first, one wrapping context.Cause(ctx). An attempt whose own
// AttemptTimeout passes counts as failed.
func Wait(ctx context.Context, f Func, opts Options) error {
	if f == nil {
		return errs.Invalid(ErrInvalid, "probe: Func is nil")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(o.Timeout)
	pause := o.Interval
	var last error
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("probe: gave up after %d attempts: %w (last attempt: %v)",
				attempt-1, context.Cause(ctx), last)
		}
		actx, cancel := context.WithDeadline(ctx, minTime(deadline, time.Now().Add(o.AttemptTimeout)))
		last = f(actx)
		cancel()
		if last == nil {
			return nil
		}
		var stop *stopError
		if errors.As(last, &stop) {
			return fmt.Errorf("probe: gave up after %d attempts: %w", attempt, stop.err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w after %d attempts in %v (Timeout %v): %w",
				ErrNotReady, attempt, time.Since(start).Round(time.Millisecond), o.Timeout, last)
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		pause = min(2*pause, o.MaxInterval)
	}
}

// stopError marks an attempt's error as final.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// Stop marks err as final: a Func returns Stop(err) when retrying cannot
// help (the server process has exited), and Wait returns err at once.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return &stopError{err: err}
}

// Once runs f a single time, bounded by timeout (zero means 2 seconds):
// the shape of a pool Checker.
func Once(ctx context.Context, f Func, timeout time.Duration) error {
	if f == nil {
		return errs.Invalid(ErrInvalid, "probe: Func is nil")
	}
	if timeout < 0 {
		return errs.Invalid(ErrInvalid, "probe: timeout (%v) is negative", timeout)
	}
	if timeout == 0 {
		timeout = defaultAttemptTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
