package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/pool"
)

func arn(fn string) string { return "arn:aws:lambda:local:000000000000:function:" + fn }

func qualified(q string) string {
	if q == "" {
		return ""
	}
	return ":" + q
}

// functionName returns the function and the qualifier (version or alias)
// an invocation names, as Lambda takes them: the function's name, its ARN
// (arn:aws:lambda:region:account:function:name), a partial ARN
// (account:function:name), each with an optional ":qualifier", or a
// Qualifier query parameter; bad says, in Lambda's words, what is wrong
// with them. The gateway serves any region and account, and only $LATEST,
// its one version.
func functionName(name, query string) (fn, qualifier, bad string) {
	parts := strings.Split(name, ":")
	switch {
	case len(parts) >= 7 && parts[0] == "arn" && parts[2] == "lambda" && parts[5] == "function":
		parts = parts[6:]
	case len(parts) >= 3 && parts[1] == "function":
		parts = parts[2:]
	}
	switch len(parts) {
	case 1:
		fn = parts[0]
	case 2:
		fn, qualifier = parts[0], parts[1]
	default:
		return "", "", "FunctionName " + strconv.Quote(name) + " is not a function name or ARN"
	}
	switch {
	case query == "":
	case qualifier == "":
		qualifier = query
	case qualifier != query:
		return "", "", "The derived qualifier from the function name does not match the specified qualifier."
	}
	return fn, qualifier, ""
}

func handleInvoke(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, qualifier, bad := functionName(r.PathValue("name"), r.URL.Query().Get("Qualifier"))
		if bad != "" {
			lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", bad)
			return
		}
		f, ok := g.Function(name)
		if !ok || qualifier != "" && qualifier != "$LATEST" {
			lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+arn(name)+qualified(qualifier))
			return
		}
		if g.draining.Load() {
			lambdaError(w, http.StatusServiceUnavailable, "ServiceException", "the gateway is shutting down")
			return
		}
		switch t := r.Header.Get("X-Amz-Invocation-Type"); t {
		case "", "RequestResponse":
		case "DryRun":
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", "InvocationType "+t+" is not supported: use RequestResponse")
			return
		}
		payload := r.Context().Value(payloadKey{}).([]byte) // authenticate read it
		if len(payload) == 0 {
			payload = []byte("{}")
		} else if !json.Valid(payload) {
			// As Lambda: a payload that is not JSON never reaches a function.
			lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException",
				"Could not parse request body into json: the payload is not valid JSON")
			return
		}
		g.inflight.Add(1)
		defer g.inflight.Add(-1)
		start := time.Now()
		ctx := runtimeapi.WithRequestID(r.Context(), w.Header().Get(headerRequestID))
		outcome := g.invoke(ctx, w, name, time.Duration(f.Timeout)*time.Second, payload)
		g.cfg.Metrics.observe(name, outcome, time.Since(start).Seconds())
	})
}

// invoke runs one invocation and writes its answer; it returns the outcome
// for the latency metric. A worker is always released or destroyed before
// it returns, whatever happens (a panic included).
func (g *Gateway) invoke(ctx context.Context, w http.ResponseWriter, fn string, timeout time.Duration, payload []byte) string {
	p, err := g.group.Pool(fn)
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
		res, err, retry := g.run(ctx, h, timeout, payload)
		if retry && attempt == 0 {
			continue // the worker died before it got the invocation
		}
		return g.answer(w, fn, timeout, res, err)
	}
}

// run invokes h's worker and releases or destroys it; retry says that the
// worker was gone before it received the invocation.
func (g *Gateway) run(ctx context.Context, h *pool.Handle[Worker], timeout time.Duration, payload []byte) (res runtimeapi.Result, err error, retry bool) {
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
	res, err = g.cfg.Runtime.Invoke(ctx, wk.Key, arn(wk.Function), payload, time.Now().Add(timeout))
	done = true
	return res, err, errors.Is(err, runtimeapi.ErrUndelivered)
}

// answer writes the result of an invocation as Lambda does: a function's
// error, a timeout and a crash are a 200 with X-Amz-Function-Error and the
// error document.
func (g *Gateway) answer(w http.ResponseWriter, fn string, timeout time.Duration, res runtimeapi.Result, err error) string {
	h := w.Header()
	h.Set("X-Amz-Executed-Version", "$LATEST")
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
		doc, _ = json.Marshal(map[string]string{"errorType": "Sandbox.Timedout", "errorMessage": fmt.Sprintf("Task timed out after %.2f seconds", timeout.Seconds())})
		h.Set("X-Amz-Function-Error", "Unhandled")
		_, _ = w.Write(doc)
		return "timeout"
	case errors.Is(err, runtimeapi.ErrGone):
		doc, _ = json.Marshal(map[string]string{"errorType": "Runtime.ExitError", "errorMessage": "Runtime exited"})
		h.Set("X-Amz-Function-Error", "Unhandled")
		_, _ = w.Write(doc)
		return "crashed"
	}
	g.log.Info("invocation canceled", "function", fn, "err", err)
	return "canceled"
}
