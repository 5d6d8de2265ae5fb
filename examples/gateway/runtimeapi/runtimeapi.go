// Package runtimeapi serves the AWS Lambda Runtime API to the gateway's
// workers, so that an unchanged Lambda runtime (a Go function built with
// github.com/aws/aws-lambda-go) runs in each of them.
//
// Each worker has its own endpoint: the server's address with the worker's
// id and secret as a path prefix ("127.0.0.1:9001/w/<id>/<secret>"), which
// is what its AWS_LAMBDA_RUNTIME_API variable holds; the runtime client
// appends "/2018-06-01/runtime/...". The owner Adds a worker before starting
// it and calls Gone once it is done with it; the server answers only the
// workers it was told about, and only requests that carry the worker's
// secret, so that a worker cannot poll another's invocations, report
// another's results or end another. A worker is ready when it first polls
// invocation/next.
package runtimeapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
)

// Limits of the Runtime API, as AWS Lambda's.
const (
	// MaxResponse is the largest response a function may return (6 MB).
	MaxResponse = 6 << 20
)

var (
	// ErrGone matches Invoke's error when the worker's runtime exited or
	// reported an init error: it must not be used again.
	ErrGone = errors.New("runtimeapi: worker gone")
	// ErrUndelivered matches Invoke's error (with ErrGone) when the worker
	// was gone before it received the invocation: it is safe to retry.
	ErrUndelivered = errors.New("runtimeapi: invocation not delivered")
	// ErrTimeout matches Invoke's error when the invocation's deadline
	// passed: the worker is still busy with it.
	ErrTimeout = errors.New("runtimeapi: invocation timed out")
)

// Result is a finished invocation.
type Result struct {
	// Payload is the function's response, or its error document
	// ({"errorMessage": ..., "errorType": ...}) when FunctionError.
	Payload []byte
	// FunctionError is set when the handler reported an error.
	FunctionError bool
}

// Server is the Runtime API of every worker.
type Server struct {
	// ConnClosed, when set before Listen, is called (on its own goroutine)
	// with the worker id of a runtime's connection that closed: a runtime
	// that crashed closes its connections at once. The caller checks
	// whether the worker still exists and calls Gone if not.
	ConnClosed func(id string)
	// Hosts, set before Handler or Listen, are the host names the server
	// answers to besides loopback names and IP addresses (which is how
	// workers reach it: their endpoint holds the listener's address).
	Hosts []string

	mu      sync.Mutex
	workers map[string]*worker
	calls   map[string]*call // by request id
	conns   map[net.Conn]*connRec
	wg      sync.WaitGroup
}

// connRec is the worker a runtime connection serves.
type connRec struct {
	mu sync.Mutex
	id string
}

type connKey struct{}

func (s *Server) track(r *http.Request, id string) {
	if rec, ok := r.Context().Value(connKey{}).(*connRec); ok {
		rec.mu.Lock()
		rec.id = id
		rec.mu.Unlock()
	}
}

type worker struct {
	id      string
	secret  []byte        // what its requests must carry
	next    chan *call    // invocations for the worker's next poll
	ready   chan struct{} // closed at the first poll
	gone    chan struct{} // closed by Gone or an init error
	once    sync.Once
	readyOK sync.Once
	polling int // next polls waiting; guarded by Server.mu
	initErr []byte
}

type call struct {
	id       string
	worker   string
	payload  []byte
	deadline time.Time
	arn      string
	done     chan Result // buffered 1
	// lost is closed when the poll that took the call had lost its
	// connection: the runtime never received it.
	lost chan struct{}
}

// New returns a Server with no workers.
func New() *Server {
	return &Server{workers: map[string]*worker{}, calls: map[string]*call{}, conns: map[net.Conn]*connRec{}}
}

// Endpoint returns the AWS_LAMBDA_RUNTIME_API value of worker id, whose
// secret Add returned, for a server reachable at addr (host:port).
func Endpoint(addr, id, secret string) string { return addr + "/w/" + id + "/" + secret }

// Add makes the server expect worker id and returns the secret its
// runtime's requests must carry (in its Endpoint): 256 random bits, which
// only the worker's environment should hold. Adding a worker twice returns
// the same secret.
func (s *Server) Add(id string) (secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workers[id]; ok {
		return string(w.secret)
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	secret = hex.EncodeToString(b[:])
	s.workers[id] = &worker{id: id, secret: []byte(secret), next: make(chan *call), ready: make(chan struct{}), gone: make(chan struct{})}
	return secret
}

// worker returns worker id, or nil if it was never added or is Gone.
func (s *Server) worker(id string) *worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers[id]
}

// WaitReady waits until worker id first polls for an invocation. It returns
// an error when the worker reports an init error, is Gone or was never
// added, or ctx ends.
func (s *Server) WaitReady(ctx context.Context, id string) error {
	w := s.worker(id)
	if w == nil {
		return ErrGone
	}
	select {
	case <-w.ready:
		return nil
	case <-w.gone:
		if w.initErr != nil {
			return &InitError{Payload: w.initErr}
		}
		return ErrGone
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// InitError is the error a runtime reported through init/error.
type InitError struct{ Payload []byte }

func (e *InitError) Error() string { return "runtimeapi: init error: " + string(e.Payload) }

// Unwrap makes an InitError match ErrGone.
func (e *InitError) Unwrap() error { return ErrGone }

// Polling reports whether worker id is waiting for an invocation now, as
// an idle runtime always is.
func (s *Server) Polling(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workers[id]
	return ok && w.polling > 0
}

// Gone tells the server that worker id no longer exists: a waiting Invoke
// or WaitReady returns ErrGone, and the server forgets it, so that a later
// Invoke returns ErrGone at once and its runtime's requests are refused.
func (s *Server) Gone(id string) {
	s.mu.Lock()
	w, ok := s.workers[id]
	delete(s.workers, id)
	s.mu.Unlock()
	if ok {
		w.once.Do(func() { close(w.gone) })
	}
}

type requestIDKey struct{}

// WithRequestID returns a context whose Invoke gives the runtime id as the
// invocation's request id (Lambda-Runtime-Aws-Request-Id), rather than a
// new one: the id the caller's client got. Ids must be unique among the
// invocations in flight.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// Invoke sends payload to worker id and waits for its result until
// deadline. arn is the function's ARN, given to the runtime. A result that
// comes once the deadline the runtime was given has passed (to the
// millisecond, as the header carries it) is a timeout too: a function that
// gives up at its context's deadline has still run past its Timeout. A
// worker that is Gone, or was never added, fails with ErrGone and
// ErrUndelivered.
func (s *Server) Invoke(ctx context.Context, id, arn string, payload []byte, deadline time.Time) (Result, error) {
	w := s.worker(id)
	if w == nil {
		return Result{}, fmt.Errorf("%w: %w", ErrGone, ErrUndelivered)
	}
	reqID, _ := ctx.Value(requestIDKey{}).(string)
	if reqID == "" {
		reqID = newID()
	}
	c := &call{worker: id, id: reqID, payload: payload, deadline: deadline, arn: arn, done: make(chan Result, 1), lost: make(chan struct{})}
	s.mu.Lock()
	s.calls[c.id] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.calls, c.id)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithDeadlineCause(ctx, deadline, ErrTimeout)
	defer cancel()
	select {
	case w.next <- c:
	case <-w.gone:
		return Result{}, fmt.Errorf("%w: %w", ErrGone, ErrUndelivered)
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
	select {
	case r := <-c.done:
		if !time.Now().Before(time.UnixMilli(deadline.UnixMilli())) {
			return Result{}, ErrTimeout
		}
		return r, nil
	case <-c.lost:
		return Result{}, fmt.Errorf("%w: %w", ErrGone, ErrUndelivered)
	case <-w.gone:
		return Result{}, ErrGone
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// Handler returns the Runtime API of every worker, behind webguard: a
// request for a Host the server does not answer to (DNS rebinding), or one
// a browser sent for a page of another site, even a GET (an image's), is
// refused with 403 before a worker's secret is looked at, so that no web
// page can take an invocation or report a result, whatever it knows.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	const base = "/w/{worker}/{secret}/2018-06-01/runtime/"
	mux.HandleFunc("GET "+base+"invocation/next", s.next)
	mux.HandleFunc("POST "+base+"invocation/{req}/response", s.result(false))
	mux.HandleFunc("POST "+base+"invocation/{req}/error", s.result(true))
	mux.HandleFunc("POST "+base+"init/error", s.initError)
	return webguard.Handler(mux, webguard.Options{Hosts: s.Hosts, Deny: deny})
}

// deny answers a request webguard refused, in the Runtime API's error
// shape.
func deny(rw http.ResponseWriter, _ *http.Request, err error) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(rw).Encode(map[string]string{"errorMessage": err.Error(), "errorType": "AccessDeniedException"})
}

// gone answers a request of a worker the server does not expect.
func gone(rw http.ResponseWriter) {
	http.Error(rw, `{"errorMessage":"worker stopped","errorType":"Runtime.Gone"}`, http.StatusGone)
}

// authorized returns the worker r comes from when it carries the worker's
// secret (compared in constant time); else it answers r, 410 for a worker
// the server does not expect and 403 for a wrong secret, and returns nil.
// Only an authorized request is tracked to its connection.
func (s *Server) authorized(rw http.ResponseWriter, r *http.Request) *worker {
	w := s.worker(r.PathValue("worker"))
	if w == nil {
		gone(rw)
		return nil
	}
	if subtle.ConstantTimeCompare([]byte(r.PathValue("secret")), w.secret) != 1 {
		http.Error(rw, `{"errorMessage":"not this worker's endpoint","errorType":"Runtime.Forbidden"}`, http.StatusForbidden)
		return nil
	}
	s.track(r, w.id)
	return w
}

func (s *Server) next(rw http.ResponseWriter, r *http.Request) {
	w := s.authorized(rw, r)
	if w == nil {
		return
	}
	w.readyOK.Do(func() { close(w.ready) })
	s.mu.Lock()
	w.polling++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		w.polling--
		s.mu.Unlock()
	}()
	select {
	case c := <-w.next:
		if r.Context().Err() != nil {
			// The runtime's connection closed while the call was on its
			// way: it never got it (a runtime that died while idle).
			close(c.lost)
			return
		}
		h := rw.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", c.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(c.deadline.UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", c.arn)
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-"+c.id)
		h.Set("Content-Type", "application/json")
		_, _ = rw.Write(c.payload)
	case <-w.gone:
		gone(rw)
	case <-r.Context().Done():
	}
}

func (s *Server) result(isErr bool) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w := s.authorized(rw, r)
		if w == nil {
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxResponse))
		s.mu.Lock()
		c, ok := s.calls[r.PathValue("req")]
		s.mu.Unlock()
		if !ok || c.worker != w.id { // another worker's call is unknown to this one
			http.Error(rw, `{"errorMessage":"unknown request id","errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		res := Result{Payload: body, FunctionError: isErr}
		if err != nil {
			res = Result{FunctionError: true, Payload: []byte(`{"errorMessage":"Response payload size exceeded maximum allowed payload size (6291556 bytes).","errorType":"Function.ResponseSizeTooLarge"}`)}
			rw.WriteHeader(http.StatusRequestEntityTooLarge)
		} else {
			rw.WriteHeader(http.StatusAccepted)
		}
		select {
		case c.done <- res:
		default: // a second result for the same request
		}
	}
}

// initError ends the worker: WaitReady reports the error until the owner
// calls Gone.
func (s *Server) initError(rw http.ResponseWriter, r *http.Request) {
	w := s.authorized(rw, r)
	if w == nil {
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	w.once.Do(func() {
		w.initErr = body // read only after gone is closed
		close(w.gone)
	})
	rw.WriteHeader(http.StatusAccepted)
}

// Listen starts serving the Runtime API on addr ("127.0.0.1:0") and returns
// the server (stop it with Shutdown or Close) and its address.
func (s *Server) Listen(addr string) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			rec := &connRec{}
			s.mu.Lock()
			s.conns[c] = rec
			s.mu.Unlock()
			return context.WithValue(ctx, connKey{}, rec)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st != http.StateClosed && st != http.StateHijacked {
				return
			}
			s.mu.Lock()
			rec := s.conns[c]
			delete(s.conns, c)
			s.mu.Unlock()
			if rec == nil || s.ConnClosed == nil {
				return
			}
			rec.mu.Lock()
			id := rec.id
			rec.mu.Unlock()
			if id != "" {
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					s.ConnClosed(id)
				}()
			}
		},
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(ln)
	}()
	return srv, ln.Addr().String(), nil
}

// Wait waits for the goroutines of the servers Listen started, once they
// were shut down.
func (s *Server) Wait() { s.wg.Wait() }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
