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

// handleInvoke answers Invoke: RequestResponse runs the function and
// answers its result, Event queues it (events.go), DryRun only checks that
// the function and its qualifier exist; LogType Tail adds the tail of the
// invocation's log (logs.go). A function that is not Active (build.go) is
// not invoked: ResourceConflictException.
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
		if st := g.status(f.Name); st.State != StateActive {
			// As Lambda: a function runs, and is dry-run, only once Active.
			conflict(st.State).write(w)
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
		logType := r.Header.Get("X-Amz-Log-Type")
		if logType != "" && logType != "None" && logType != "Tail" {
			lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException",
				"1 validation error detected: Value '"+logType+"' at 'logType' failed to satisfy constraint: Member must satisfy enum value set: [None, Tail]")
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
		target := invocation{
			id: w.Header().Get(headerRequestID), fn: f.Name, version: version, arn: functionARN(req.region, f.Name, qualifier),
			timeout: time.Duration(f.Timeout) * time.Second, memoryMB: f.MemorySize,
			tail: logType == "Tail" && typ != "Event", // as Lambda: an event's log goes nowhere
		}
		if typ == "Event" {
			if err := g.enqueue(target, payload); err != nil {
				err.write(w)
				return
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		g.inflight.Add(1)
		defer g.inflight.Add(-1)
		start := time.Now()
		outcome := g.invoke(r.Context(), w, target, payload)
		g.cfg.Metrics.observe(f.Name, outcome, time.Since(start).Seconds())
	})
}

// invocation is what an invocation runs: a function's version, invoked
// by an ARN, with its timeout, under a request id; tail asks for the tail
// of its log.
type invocation struct {
	id, fn, version, arn string
	timeout              time.Duration
	memoryMB             int
	tail                 bool
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
		r := g.run(ctx, h, inv, payload)
		if r.retry && attempt == 0 {
			continue // the worker died before it got the invocation
		}
		return g.answer(w, inv, r)
	}
}

// ran is what became of an invocation a worker was given.
type ran struct {
	res runtimeapi.Result
	err error
	// retry says that the worker was gone before it received the
	// invocation.
	retry bool
	// output is what the worker wrote meanwhile, and took how long it ran,
	// for the tail of its log.
	output []byte
	took   time.Duration
}

// run invokes h's worker and releases or destroys it.
func (g *Gateway) run(ctx context.Context, h *pool.Handle[Worker], inv invocation, payload []byte) (r ran) {
	done := false
	wk := h.Value()
	defer func() {
		switch {
		case !done: // a panic
			h.Destroy(ReasonCrashed)
		case r.err == nil:
			h.Release()
		case errors.Is(r.err, runtimeapi.ErrTimeout):
			h.Destroy(ReasonTimeout)
		case errors.Is(r.err, runtimeapi.ErrGone):
			h.Destroy(ReasonCrashed)
		default:
			h.Destroy(ReasonCanceled)
		}
	}()
	mark, logged := g.cfg.Logs.mark(wk.Key)
	start := time.Now()
	r.res, r.err = g.cfg.Runtime.Invoke(runtimeapi.WithRequestID(ctx, inv.id), wk.Key, inv.arn, payload, start.Add(inv.timeout))
	r.took = time.Since(start)
	r.retry = errors.Is(r.err, runtimeapi.ErrUndelivered)
	if inv.tail && logged && !r.retry {
		// Before the worker goes back to the pool: what it writes next
		// is another invocation's.
		r.output = g.cfg.Logs.since(wk.Key, mark, logQuiet, logWait)
	}
	done = true
	return r
}

// The wait for the last lines of a worker's output, which travel through a
// pipe while its result comes over HTTP: until it has been quiet for
// logQuiet, at most logWait. Only an invocation that asks for its log
// waits.
const (
	logQuiet = 50 * time.Millisecond
	logWait  = 500 * time.Millisecond
)

// answer writes the result of an invocation as Lambda does: a function's
// error, a timeout and a crash are a 200 with X-Amz-Function-Error and the
// error document.
func (g *Gateway) answer(w http.ResponseWriter, inv invocation, r ran) string {
	h := w.Header()
	h.Set("X-Amz-Executed-Version", inv.version)
	h.Set("Content-Type", "application/json")
	outcome, doc, note := "ok", r.res.Payload, ""
	switch {
	case r.err == nil && !r.res.FunctionError:
	case r.err == nil:
		outcome = "function_error"
	case errors.Is(r.err, runtimeapi.ErrTimeout):
		msg := fmt.Sprintf("Task timed out after %.2f seconds", inv.timeout.Seconds())
		doc, _ = json.Marshal(map[string]string{"errorType": "Sandbox.Timedout", "errorMessage": msg})
		outcome, note = "timeout", time.Now().UTC().Format("2006-01-02T15:04:05.000Z")+" "+inv.id+" "+msg
	case errors.Is(r.err, runtimeapi.ErrGone):
		doc, _ = json.Marshal(map[string]string{"errorType": "Runtime.ExitError", "errorMessage": "Runtime exited"})
		outcome, note = "crashed", "RequestId: "+inv.id+" Error: Runtime exited\nRuntime.ExitError"
	default:
		g.log.Info("invocation canceled", "function", inv.fn, "err", r.err)
		return "canceled"
	}
	if outcome != "ok" {
		h.Set("X-Amz-Function-Error", "Unhandled")
	}
	if inv.tail {
		h.Set("X-Amz-Log-Result", logResult(inv.id, inv.version, r.output, r.took, inv.memoryMB, note))
	}
	_, _ = w.Write(doc)
	return outcome
}
