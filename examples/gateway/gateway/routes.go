package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/pool"
)

// MaxPayload is the largest request payload, as AWS Lambda's (6 MB).
const MaxPayload = 6 << 20

// NewServer returns the gateway's HTTP surface: the Lambda Invoke API,
// /healthz and /metrics. When the gateway's Config.APIKey is set, every
// request but /healthz must carry it (X-Api-Key, or Authorization: Bearer):
// one without gets 401 MissingAuthenticationTokenException, one with
// another key 403 UnrecognizedClientException, in the Lambda API's error
// shape, before anything else is looked at.
func NewServer(g *Gateway, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /2015-03-31/functions/{name}/invocations", handleInvoke(g))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if g.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return requireKey(g.cfg.APIKey, mux)
}

// requireKey lets through to next only the requests that carry key, and
// GET /healthz; an empty key lets every request through. Keys are
// compared as SHA-256 digests in constant time, so that neither their
// bytes nor their length can be found by timing. (One mux behind a check,
// rather than a mux in front of another: each costs allocations.)
func requireKey(key string, next http.Handler) http.Handler {
	if key == "" {
		return next
	}
	want := sha256.Sum256([]byte(key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := credential(r.Header)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ttlkit-gateway"`)
			lambdaError(w, http.StatusUnauthorized, "MissingAuthenticationTokenException",
				"an API key is required: send it in an X-Api-Key header, or as a bearer token in Authorization")
			return
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			lambdaError(w, http.StatusForbidden, "UnrecognizedClientException", "the API key is not valid")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// credential returns the API key of a request: its X-Api-Key header, else
// the token of an "Authorization: Bearer" header (an AWS SDK's own
// Authorization header, a SigV4 signature, is not a key).
func credential(h http.Header) (string, bool) {
	if k := h.Get("X-Api-Key"); k != "" {
		return k, true
	}
	scheme, token, ok := strings.Cut(h.Get("Authorization"), " ")
	if token = strings.TrimSpace(token); ok && strings.EqualFold(scheme, "Bearer") && token != "" {
		return token, true
	}
	return "", false
}

// lambdaError writes an error in the shape of the Lambda API's: the
// X-Amzn-Errortype header names the exception the AWS SDKs report.
func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "Message": msg, "message": msg})
}

func arn(fn string) string { return "arn:aws:lambda:local:000000000000:function:" + fn }

func handleInvoke(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		f, ok := g.Function(name)
		if !ok {
			lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+arn(name))
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
		payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxPayload))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				lambdaError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException",
					fmt.Sprintf("Request must be smaller than %d bytes for the InvokeFunction operation", MaxPayload))
				return
			}
			lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
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
		g.inflight.Add(1)
		defer g.inflight.Add(-1)
		start := time.Now()
		outcome := g.invoke(r.Context(), w, name, time.Duration(f.Timeout)*time.Second, payload)
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
