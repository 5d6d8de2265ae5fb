package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/pool"
)

// MaxPayload is the largest request payload, as AWS Lambda's (6 MB).
const MaxPayload = 6 << 20

// NewServer returns the gateway's HTTP surface: the Lambda Invoke API,
// /healthz and /metrics, behind two guards.
//
// First webguard's: a request for a Host the gateway does not answer to
// (DNS rebinding), or one a browser sent for a page of another site, is
// refused with 403 AccessDeniedException, whatever its method, path or
// content type. Then AWS SigV4: every request but those of /healthz and
// /metrics must be signed with one of Config.Credentials, as the AWS SDKs
// and CLI sign, or it is refused with the exception AWS answers
// (MissingAuthenticationTokenException, UnrecognizedClientException,
// InvalidSignatureException, ...). A refused request reaches nothing else:
// it learns not even whether a function exists. /metrics holds aggregates
// only and stays open to a local scraper, which cannot sign.
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
	return webguard.Handler(g.authenticate(mux), webguard.Options{Hosts: g.cfg.Hosts, Deny: g.deny})
}

// deny answers a request webguard refused.
func (g *Gateway) deny(w http.ResponseWriter, r *http.Request, err error) {
	reason := RefusedCrossSite
	if errors.Is(err, webguard.ErrHost) {
		reason = RefusedHost
	}
	g.cfg.Metrics.refuse(reason)
	lambdaError(w, http.StatusForbidden, "AccessDeniedException", err.Error())
}

// payloadKey holds, in a request's context, the body its signature was
// verified over: the body is read once.
type payloadKey struct{}

// authenticate lets through to next the requests of /healthz and
// /metrics, and those signed with one of the gateway's key pairs, the body
// read (at most MaxPayload) and put in the request's context. What the
// signature tells without the body is checked before the body is read, so
// a request without a known access key costs no read.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/healthz" || r.URL.Path == "/metrics") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		signed, err := g.verifier.Check(r, time.Now())
		if err != nil {
			g.refuseSignature(w, err)
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
		if err := signed.Verify(payload); err != nil {
			g.refuseSignature(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), payloadKey{}, payload)))
	})
}

// refuseSignature answers a request whose signature sigv4 refused, with
// the exception AWS answers.
func (g *Gateway) refuseSignature(w http.ResponseWriter, err error) {
	var e *sigv4.Error
	if !errors.As(err, &e) {
		e = &sigv4.Error{Code: sigv4.InvalidSignature, Message: err.Error()}
	}
	switch e.Code {
	case sigv4.MissingAuthenticationToken:
		g.cfg.Metrics.refuse(RefusedUnsigned)
	case sigv4.UnrecognizedClient:
		g.cfg.Metrics.refuse(RefusedUnknownKey)
	default:
		g.cfg.Metrics.refuse(RefusedSignature)
	}
	// The canonical request the gateway computed goes to the log, not to
	// the client: it is what the author of a client whose signatures fail
	// compares with their signer's.
	g.log.Debug("request refused", "exception", e.Code, "message", e.Message, "canonical", e.Canonical)
	lambdaError(w, http.StatusForbidden, e.Code, e.Message)
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
