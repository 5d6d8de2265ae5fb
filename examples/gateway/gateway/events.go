package gateway

import (
	"context"
	"net/http"
	"time"
)

// Asynchronous invocations (InvocationType Event), as Lambda runs them:
// answered 202 at once, queued, run, and a failed run retried twice. The
// queue is this process's memory: the events it holds are lost when the
// gateway stops.

// Defaults of asynchronous invocations.
const (
	// DefaultEventRetryDelay is the wait before the first retry of a
	// failed event (Lambda waits about a minute); the second waits twice as
	// long.
	DefaultEventRetryDelay = time.Second
	// DefaultMaxQueuedEvents bounds the events held at once.
	DefaultMaxQueuedEvents = 10000
	// MaxEventPayload is the largest payload of an event, as Lambda's
	// (1 MB).
	MaxEventPayload = 1 << 20
	// eventRetries is how many times a failed event is retried, as by
	// Lambda.
	eventRetries = 2
)

// Results of an event, in gateway_events_total.
const (
	EventSucceeded = "succeeded" // a run returned a result
	EventFailed    = "failed"    // every run failed (the function's error, a timeout, a crash, no worker)
	EventDropped   = "dropped"   // the gateway stopped before it succeeded
)

// event is one asynchronous invocation.
type event struct {
	inv     invocation
	payload []byte
}

// enqueue queues an event and starts running it; it answers
// TooManyRequestsException when MaxQueuedEvents are held already.
func (g *Gateway) enqueue(inv invocation, payload []byte) *apiError {
	if n := g.queued.Add(1); n > int64(g.cfg.MaxQueuedEvents) {
		g.queued.Add(-1)
		return &apiError{http.StatusTooManyRequests, "TooManyRequestsException", "Rate Exceeded: the gateway holds as many asynchronous invocations as it may"}
	}
	g.eventsMu.Lock()
	defer g.eventsMu.Unlock()
	if g.eventsClosed {
		g.queued.Add(-1)
		return &apiError{http.StatusServiceUnavailable, "ServiceException", "the gateway is shutting down"}
	}
	g.events.Add(1)
	go func() {
		defer g.events.Done()
		defer g.queued.Add(-1)
		g.runEvent(event{inv: inv, payload: payload})
	}()
	return nil
}

// runEvent runs ev until a run succeeds, retrying a failed one after
// EventRetryDelay and then twice that, as Lambda does; each attempt keeps
// the event's request id. Stopping the gateway drops it.
func (g *Gateway) runEvent(ev event) {
	ctx := g.eventsCtx
	log := g.log.With("function", ev.inv.fn, "request_id", ev.inv.id)
	delay := g.cfg.EventRetryDelay
	for attempt := 0; ; attempt++ {
		outcome := g.runOnce(ctx, ev)
		switch {
		case outcome == "ok":
			g.cfg.Metrics.event(ev.inv.fn, EventSucceeded)
			return
		case ctx.Err() != nil || outcome == "unavailable":
			log.Warn("asynchronous invocation dropped", "attempts", attempt+1, "outcome", outcome)
			g.cfg.Metrics.event(ev.inv.fn, EventDropped)
			return
		case attempt == eventRetries:
			log.Warn("asynchronous invocation failed", "attempts", attempt+1, "outcome", outcome)
			g.cfg.Metrics.event(ev.inv.fn, EventFailed)
			return
		}
		log.Info("asynchronous invocation failed: retrying", "attempt", attempt+1, "outcome", outcome, "in", delay)
		g.cfg.Metrics.eventRetry(ev.inv.fn)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		if ctx.Err() != nil || g.draining.Load() {
			// A drain waits for the runs in progress, not for retries.
			log.Warn("asynchronous invocation dropped: the gateway is stopping", "attempts", attempt+1)
			g.cfg.Metrics.event(ev.inv.fn, EventDropped)
			return
		}
		delay *= 2
	}
}

// runOnce runs one attempt of ev, counted in flight as a synchronous
// invocation is, so that a drain waits for it.
func (g *Gateway) runOnce(ctx context.Context, ev event) string {
	g.inflight.Add(1)
	defer g.inflight.Add(-1)
	start := time.Now()
	outcome := g.invoke(ctx, &discard{h: http.Header{}}, ev.inv, ev.payload)
	g.cfg.Metrics.observe(ev.inv.fn, outcome, time.Since(start).Seconds())
	return outcome
}

// QueuedEvents returns how many asynchronous invocations the gateway holds:
// waiting for a worker, running, or waiting for a retry.
func (g *Gateway) QueuedEvents() int { return int(g.queued.Load()) }

// discard is an answer no one reads: an event's.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
