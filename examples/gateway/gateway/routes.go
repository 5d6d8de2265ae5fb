package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/internal/webguard"
)

// MaxPayload is the largest request payload, as AWS Lambda's (6 MB).
const MaxPayload = 6 << 20

// API is the path prefix of the Lambda API's operations.
const API = "/2015-03-31/functions"

// NewServer returns the gateway's HTTP surface: the Lambda API's Invoke,
// ListFunctions, GetFunction and GetFunctionConfiguration, /healthz and
// /metrics, behind two guards. Every answer carries an x-amzn-RequestId,
// and every error the Lambda API's shape: the exception in
// X-Amzn-ErrorType and {"Type": ..., "message": ...}, which the AWS SDKs
// turn into their typed errors (an unknown operation too).
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
	mux.Handle("POST "+API+"/{name}/invocations", handleInvoke(g))
	mux.Handle("GET "+API, handleListFunctions(g))
	mux.Handle("GET "+API+"/{$}", handleListFunctions(g))
	mux.Handle("GET "+API+"/{name}", handleGetFunction(g))
	mux.Handle("GET "+API+"/{name}/configuration", handleGetFunctionConfiguration(g))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if g.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Whatever else was signed: Lambda's answer to an operation it does
	// not have, in its error shape, not net/http's plain-text 404 or 405
	// (which the SDKs fail to parse).
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		lambdaError(w, http.StatusNotFound, "UnknownOperationException", "Unknown operation "+r.Method+" "+r.URL.EscapedPath())
	})
	return withRequestID(webguard.Handler(g.authenticate(mux), webguard.Options{Hosts: g.cfg.Hosts, Deny: g.deny}))
}

// withRequestID gives every answer an x-amzn-RequestId, as AWS does: a new
// UUID, which an invocation also gives its function (its AWS request id).
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headerRequestID, newRequestID())
		next.ServeHTTP(w, r)
	})
}

// headerRequestID is x-amzn-RequestId, as net/http writes it (header names
// are case-insensitive).
const headerRequestID = "X-Amzn-Requestid"

// deny answers a request webguard refused.
func (g *Gateway) deny(w http.ResponseWriter, r *http.Request, err error) {
	reason := RefusedCrossSite
	if errors.Is(err, webguard.ErrHost) {
		reason = RefusedHost
	}
	g.cfg.Metrics.refuse(reason)
	lambdaError(w, http.StatusForbidden, "AccessDeniedException", err.Error())
}

// signedKey holds, in a request's context, what authenticate learnt of it.
type signedKey struct{}

// signedRequest is what authenticate learnt of a request: the body its
// signature was verified over (read once), and the region it was signed
// for, which is the one the client calls and the one of the ARNs the
// gateway answers it.
type signedRequest struct {
	payload []byte
	region  string
}

// request returns what authenticate learnt of r.
func request(r *http.Request) signedRequest {
	s, _ := r.Context().Value(signedKey{}).(signedRequest)
	return s
}

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
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), signedKey{}, signedRequest{payload, signed.Region()})))
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
// X-Amzn-ErrorType header names the exception the AWS SDKs report, and the
// body says whose fault it is ("User" for a 4xx, "Service" for a 5xx) and
// what happened.
func lambdaError(w http.ResponseWriter, status int, exception, msg string) {
	fault := "User"
	if status >= 500 {
		fault = "Service"
	}
	w.Header().Set("X-Amzn-Errortype", exception)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Type    string `json:"Type"`
		Message string `json:"message"`
	}{fault, msg})
}

// newRequestID returns a random UUID (version 4), the form of AWS request
// ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
