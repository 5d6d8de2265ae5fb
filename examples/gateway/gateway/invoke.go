package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/pool"
)

func handleInvoke(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := request(r)
		f, version, qualifier, apiErr := g.resolve(req.region, r.PathValue("name"), r.URL.Query().Get("Qualifier"))
		if apiErr != nil {
			apiErr.write(w)
			return
		}
		if g.draining.Load() {
			lambdaError(w, http.StatusServiceUnavailable, "ServiceException", "the gateway is shutting down")
			return
		}
		typ := r.Header.Get("X-Amz-Invocation-Type")
		switch typ {
		case "", "RequestResponse", "Event":
		case "DryRun":
			// The function exists, and whoever signed may invoke it (the
			// gateway has one key pair for all): nothing runs.
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException",
				"1 validation error detected: Value '"+typ+"' at 'invocationType' failed to satisfy constraint: Member must satisfy enum value set: [Event, RequestResponse, DryRun]")
			return
		}
		payload := req.payload
		if typ == "Event" && len(payload) > MaxEventPayload {
			lambdaError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException",
				fmt.Sprintf("Request must be smaller than %d bytes for the InvokeAsync operation", MaxEventPayload))
			return
		}
		if len(payload) == 0 {
			payload = []byte("{}")
		} else if !json.Valid(payload) {
			// As Lambda: a payload that is not JSON never reaches a function.
			lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException",
				"Could not parse request body into json: the payload is not valid JSON")
			return
		}
		target := invocation{fn: f.Name, version: version, arn: functionARN(req.region, f.Name, qualifier), timeout: time.Duration(f.Timeout) * time.Second}
		if typ == "Event" {
			if err := g.enqueue(target, payload, w.Header().Get(headerRequestID)); err != nil {
				err.write(w)
				return
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		g.inflight.Add(1)
		defer g.inflight.Add(-1)
		start := time.Now()
		ctx := runtimeapi.WithRequestID(r.Context(), w.Header().Get(headerRequestID))
		outcome := g.invoke(ctx, w, target, payload)
		g.cfg.Metrics.observe(f.Name, outcome, time.Since(start).Seconds())
	})
}

// invocation is what an invocation runs: a function's version, invoked
// by an ARN, with its timeout.
type invocation struct {
	fn, version, arn string
	timeout          time.Duration
}

// invoke runs one invocation and writes its answer; it returns the outcome
// for the latency metric. A worker is always released or destroyed before
// it returns, whatever happens (a panic included).
func (g *Gateway) invoke(ctx context.Context, w http.ResponseWriter, inv invocation, payload []byte) string {
	p, err := g.group.Pool(inv.fn)
	if err != nil {
		lambdaError(w, http.StatusServiceUnavailable, "ServiceException", err.Error())
		return "unavailable"
	}
	for attempt := 0; ; attempt++ {
		h, err := p.Acquire(ctx)
		switch {
		case errors.Is(err, pool.ErrClosed):
			lambdaError(w, http.StatusServiceUnavailable, "ServiceException", "the gateway is shutting down")
			return "unavailable"
		case ctx.Err() != nil:
			return "canceled"
		case err != nil:
			lambdaError(w, http.StatusBadGateway, "ServiceException", "could not start a worker: "+err.Error())
			return "create_failed"
		}
		res, err, retry := g.run(ctx, h, inv, payload)
		if retry && attempt == 0 {
			continue // the worker died before it got the invocation
		}
		return g.answer(w, inv, res, err)
	}
}

// run invokes h's worker and releases or destroys it; retry says that the
// worker was gone before it received the invocation.
func (g *Gateway) run(ctx context.Context, h *pool.Handle[Worker], inv invocation, payload []byte) (res runtimeapi.Result, err error, retry bool) {
	done := false
	defer func() {
		switch {
		case !done: // a panic
			h.Destroy(ReasonCrashed)
		case err == nil:
			h.Release()
		case errors.Is(err, runtimeapi.ErrTimeout):
			h.Destroy(ReasonTimeout)
		case errors.Is(err, runtimeapi.ErrGone):
			h.Destroy(ReasonCrashed)
		default:
			h.Destroy(ReasonCanceled)
		}
	}()
	wk := h.Value()
	res, err = g.cfg.Runtime.Invoke(ctx, wk.Key, inv.arn, payload, time.Now().Add(inv.timeout))
	done = true
	return res, err, errors.Is(err, runtimeapi.ErrUndelivered)
}

// answer writes the result of an invocation as Lambda does: a function's
// error, a timeout and a crash are a 200 with X-Amz-Function-Error and the
// error document.
func (g *Gateway) answer(w http.ResponseWriter, inv invocation, res runtimeapi.Result, err error) string {
	h := w.Header()
	h.Set("X-Amz-Executed-Version", inv.version)
	h.Set("Content-Type", "application/json")
	var doc []byte
	switch {
	case err == nil && !res.FunctionError:
		_, _ = w.Write(res.Payload)
		return "ok"
	case err == nil:
		h.Set("X-Amz-Function-Error", "Unhandled")
		_, _ = w.Write(res.Payload)
		return "function_error"
	case errors.Is(err, runtimeapi.ErrTimeout):
		doc, _ = json.Marshal(map[string]string{"errorType": "Sandbox.Timedout", "errorMessage": fmt.Sprintf("Task timed out after %.2f seconds", inv.timeout.Seconds())})
		h.Set("X-Amz-Function-Error", "Unhandled")
		_, _ = w.Write(doc)
		return "timeout"
	case errors.Is(err, runtimeapi.ErrGone):
		doc, _ = json.Marshal(map[string]string{"errorType": "Runtime.ExitError", "errorMessage": "Runtime exited"})
		h.Set("X-Amz-Function-Error", "Unhandled")
		_, _ = w.Write(doc)
		return "crashed"
	}
	g.log.Info("invocation canceled", "function", inv.fn, "err", err)
	return "canceled"
}
