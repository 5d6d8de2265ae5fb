package runtimeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// listen serves s on a free port until the test ends.
func listen(t *testing.T, s *runtimeapi.Server) string {
	t.Helper()
	srv, addr, err := s.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() {
		// Shutdown waits for connections still closing (a refused body
		// lingers half a second); Close ends what is left.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		s.Wait()
	})
	return addr
}

// startRuntime runs this test binary as the Lambda runtime of worker id,
// whose secret is secret.
func startRuntime(t *testing.T, addr, id, secret string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), gwtest.Env+"=1", "AWS_LAMBDA_RUNTIME_API="+runtimeapi.Endpoint(addr, id, secret))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// An unchanged aws-lambda-go runtime runs against the server: ready at its
// first poll, results and handler errors, the deadline and ARN it is
// given, and its crash seen through ConnClosed.
func TestRealRuntime(t *testing.T) {
	s := runtimeapi.New()
	closed := make(chan string, 16)
	s.ConnClosed = func(id string) { closed <- id }
	addr := listen(t, s)
	secret := s.Add("w1")
	cmd := startRuntime(t, addr, "w1", secret)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.WaitReady(ctx, "w1"))
	require.Eventually(t, func() bool { return s.Polling("w1") }, 10*time.Second, 5*time.Millisecond)
	assert.False(t, s.Polling("w2"), "an unknown worker does not poll")

	deadline := time.Now().Add(30 * time.Second)
	const arn = "arn:aws:lambda:local:000000000000:function:fn"
	res, err := s.Invoke(ctx, "w1", arn, []byte(`{"echo":"hi"}`), deadline)
	require.NoError(t, err)
	assert.False(t, res.FunctionError)
	var got gwtest.Response
	require.NoError(t, json.Unmarshal(res.Payload, &got))
	assert.JSONEq(t, `"hi"`, string(got.Echo))
	assert.Equal(t, arn, got.ARN)
	assert.Equal(t, deadline.UnixMilli(), got.DeadlineMS)
	assert.Len(t, got.RequestID, 36)

	res, err = s.Invoke(ctx, "w1", arn, []byte(`{"fail":"boom"}`), deadline)
	require.NoError(t, err)
	assert.True(t, res.FunctionError)
	var doc struct{ ErrorMessage, ErrorType string }
	require.NoError(t, json.Unmarshal(res.Payload, &doc))
	assert.Equal(t, "boom", doc.ErrorMessage)
	assert.NotEmpty(t, doc.ErrorType)

	res, err = s.Invoke(ctx, "w1", arn, []byte(`{"echo":"again"}`), deadline)
	require.NoError(t, err, "a handler error keeps the runtime")
	assert.Contains(t, string(res.Payload), `"echo":"again"`)

	// A runtime that dies closes its connection at once.
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	select {
	case id := <-closed:
		assert.Equal(t, "w1", id)
	case <-time.After(10 * time.Second):
		t.Fatal("ConnClosed was not called")
	}
	s.Gone("w1")
	_, err = s.Invoke(ctx, "w1", arn, []byte(`{}`), deadline)
	assert.ErrorIs(t, err, runtimeapi.ErrGone, "at once, not at the deadline")
	assert.ErrorIs(t, err, runtimeapi.ErrUndelivered)
}

func post(t *testing.T, url string, body io.Reader) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", body)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// The protocol as the Runtime API defines it, for what a well-behaved
// runtime does not send: init errors, unknown request ids, an oversized
// response.
func TestProtocol(t *testing.T) {
	s := runtimeapi.New()
	addr := listen(t, s)
	secret := s.Add("w")
	base := "http://" + runtimeapi.Endpoint(addr, "w", secret) + "/2018-06-01/runtime/"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// next: the invocation and its headers.
	type polled struct {
		resp *http.Response
		body []byte
	}
	poll := func() <-chan polled {
		ch := make(chan polled, 1)
		go func() {
			resp, err := http.Get(base + "invocation/next")
			if !assert.NoError(t, err) {
				ch <- polled{}
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ch <- polled{resp, body}
		}()
		return ch
	}
	next := poll()
	require.NoError(t, s.WaitReady(ctx, "w"))
	deadline := time.Now().Add(time.Minute)
	type result struct {
		res runtimeapi.Result
		err error
	}
	invoke := func(payload string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			res, err := s.Invoke(ctx, "w", "arn:x", []byte(payload), deadline)
			ch <- result{res, err}
		}()
		return ch
	}
	done := invoke(`{"n":1}`)
	p := <-next
	require.NotNil(t, p.resp)
	assert.Equal(t, http.StatusOK, p.resp.StatusCode)
	assert.Equal(t, `{"n":1}`, string(p.body))
	reqID := p.resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	assert.Len(t, reqID, 36)
	assert.Equal(t, strconv.FormatInt(deadline.UnixMilli(), 10), p.resp.Header.Get("Lambda-Runtime-Deadline-Ms"))
	assert.Equal(t, "arn:x", p.resp.Header.Get("Lambda-Runtime-Invoked-Function-Arn"))
	assert.NotEmpty(t, p.resp.Header.Get("Lambda-Runtime-Trace-Id"))

	assert.Equal(t, http.StatusBadRequest, post(t, base+"invocation/nope/response", strings.NewReader("{}")).StatusCode, "unknown request id")
	// A response over 6 MB is refused and becomes the function's error.
	big := bytes.Repeat([]byte("a"), runtimeapi.MaxResponse+1)
	assert.Equal(t, http.StatusRequestEntityTooLarge, post(t, base+"invocation/"+reqID+"/response", bytes.NewReader(big)).StatusCode)
	r := <-done
	require.NoError(t, r.err)
	assert.True(t, r.res.FunctionError)
	assert.Contains(t, string(r.res.Payload), "Function.ResponseSizeTooLarge")

	// A response of exactly 6 MB is delivered.
	next = poll()
	done = invoke(`{}`)
	p = <-next
	reqID = p.resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	exact := bytes.Repeat([]byte("b"), runtimeapi.MaxResponse)
	assert.Equal(t, http.StatusAccepted, post(t, base+"invocation/"+reqID+"/response", bytes.NewReader(exact)).StatusCode)
	r = <-done
	require.NoError(t, r.err)
	assert.False(t, r.res.FunctionError)
	assert.Len(t, r.res.Payload, runtimeapi.MaxResponse)

	// An error report.
	next = poll()
	done = invoke(`{}`)
	p = <-next
	reqID = p.resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	assert.Equal(t, http.StatusAccepted, post(t, base+"invocation/"+reqID+"/error", strings.NewReader(`{"errorMessage":"bad","errorType":"E"}`)).StatusCode)
	r = <-done
	require.NoError(t, r.err)
	assert.True(t, r.res.FunctionError)
	assert.JSONEq(t, `{"errorMessage":"bad","errorType":"E"}`, string(r.res.Payload))

	// An init error: WaitReady reports it, and it matches ErrGone.
	brokenSecret := s.Add("broken")
	initBase := "http://" + runtimeapi.Endpoint(addr, "broken", brokenSecret) + "/2018-06-01/runtime/"
	assert.Equal(t, http.StatusAccepted, post(t, initBase+"init/error", strings.NewReader(`{"errorMessage":"no config"}`)).StatusCode)
	err := s.WaitReady(ctx, "broken")
	var ie *runtimeapi.InitError
	require.ErrorAs(t, err, &ie)
	assert.Contains(t, string(ie.Payload), "no config")
	assert.ErrorIs(t, err, runtimeapi.ErrGone)
	_, err = s.Invoke(ctx, "broken", "arn:x", nil, deadline)
	assert.ErrorIs(t, err, runtimeapi.ErrUndelivered)

	// A worker the server was not told about, or no longer knows, is
	// refused.
	unknown := "http://" + runtimeapi.Endpoint(addr, "stranger", secret) + "/2018-06-01/runtime/"
	resp, err := http.Get(unknown + "invocation/next")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusGone, resp.StatusCode)
	assert.Equal(t, http.StatusGone, post(t, unknown+"init/error", strings.NewReader("{}")).StatusCode)
	assert.ErrorIs(t, s.WaitReady(ctx, "stranger"), runtimeapi.ErrGone)

	// Gone ends a waiting poll with 410.
	next = poll()
	require.Eventually(t, func() bool { return s.Polling("w") }, 10*time.Second, 5*time.Millisecond)
	s.Gone("w")
	p = <-next
	assert.Equal(t, http.StatusGone, p.resp.StatusCode)
}

// The routes of every worker, served in the test's bubble without a
// network, so that deadlines run on synctest's clock.
func call(h http.Handler, method, path string, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, runtimeRequest(method, "/w/"+path, body))
	return rec
}

// runtimeRequest is a request as a worker's runtime sends it: to the
// server's address (httptest's own requests are for example.com, which the
// server does not answer to).
func runtimeRequest(method, target, body string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Host = "127.0.0.1:9001"
	return r
}

func TestTimeouts(t *testing.T) {
	t.Run("undelivered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := runtimeapi.New()
			s.Add("w")
			start := time.Now()
			_, err := s.Invoke(t.Context(), "w", "arn", nil, start.Add(3*time.Second))
			assert.ErrorIs(t, err, runtimeapi.ErrTimeout)
			assert.NotErrorIs(t, err, runtimeapi.ErrGone)
			assert.Equal(t, 3*time.Second, time.Since(start), "at the deadline, not before")
		})
	})
	t.Run("delivered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := runtimeapi.New()
			ws := s.Add("w")
			h := s.Handler()
			got := make(chan *httptest.ResponseRecorder, 1)
			go func() { got <- call(h, "GET", "w/"+ws+"/2018-06-01/runtime/invocation/next", "") }()
			synctest.Wait()
			assert.True(t, s.Polling("w"))
			start := time.Now()
			_, err := s.Invoke(t.Context(), "w", "arn", []byte(`{}`), start.Add(2*time.Second))
			assert.ErrorIs(t, err, runtimeapi.ErrTimeout)
			assert.Equal(t, 2*time.Second, time.Since(start))
			rec := <-got
			id := rec.Header().Get("Lambda-Runtime-Aws-Request-Id")
			assert.False(t, s.Polling("w"), "the runtime is still busy with the invocation")
			// Its late response is refused: nobody waits for it.
			assert.Equal(t, http.StatusBadRequest, call(h, "POST", "w/"+ws+"/2018-06-01/runtime/invocation/"+id+"/response", "{}").Code)
		})
	})
	// A runtime that answers at the deadline it was given (a function that
	// gives up when its context ends) has timed out, though the gateway's
	// own deadline is a fraction of a millisecond later; a millisecond
	// before, it has not.
	t.Run("answered at the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := runtimeapi.New()
			ws := s.Add("w")
			h := s.Handler()
			for _, early := range []time.Duration{0, time.Millisecond} {
				go func() {
					rec := call(h, "GET", "w/"+ws+"/2018-06-01/runtime/invocation/next", "")
					ms, _ := strconv.ParseInt(rec.Header().Get("Lambda-Runtime-Deadline-Ms"), 10, 64)
					time.Sleep(time.Until(time.UnixMilli(ms)) - early)
					call(h, "POST", "w/"+ws+"/2018-06-01/runtime/invocation/"+rec.Header().Get("Lambda-Runtime-Aws-Request-Id")+"/response", "{}")
				}()
				synctest.Wait()
				_, err := s.Invoke(t.Context(), "w", "arn", nil, time.Now().Add(2*time.Second+500*time.Microsecond))
				if early == 0 {
					assert.ErrorIs(t, err, runtimeapi.ErrTimeout)
				} else {
					assert.NoError(t, err)
				}
				synctest.Wait()
			}
		})
	})
	t.Run("canceled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := runtimeapi.New()
			s.Add("w")
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, err := s.Invoke(ctx, "w", "arn", nil, time.Now().Add(time.Hour))
			assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's end is not the invocation's timeout")
			assert.NotErrorIs(t, err, runtimeapi.ErrTimeout)
		})
	})
	t.Run("gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := runtimeapi.New()
			s.Add("w")
			vs := s.Add("v")
			h := s.Handler()
			errc := make(chan error, 1)
			go func() {
				_, err := s.Invoke(t.Context(), "w", "arn", nil, time.Now().Add(time.Hour))
				errc <- err
			}()
			time.Sleep(time.Minute)
			s.Gone("w")
			err := <-errc
			assert.ErrorIs(t, err, runtimeapi.ErrGone)
			assert.ErrorIs(t, err, runtimeapi.ErrUndelivered, "never polled: safe to retry")

			go func() { call(h, "GET", "v/"+vs+"/2018-06-01/runtime/invocation/next", "") }()
			go func() {
				_, err := s.Invoke(t.Context(), "v", "arn", nil, time.Now().Add(time.Hour))
				errc <- err
			}()
			synctest.Wait()
			s.Gone("v")
			err = <-errc
			assert.ErrorIs(t, err, runtimeapi.ErrGone)
			assert.NotErrorIs(t, err, runtimeapi.ErrUndelivered, "delivered: the worker may have run it")
			synctest.Wait()
		})
	})
	t.Run("ready", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := runtimeapi.New()
			s.Add("slow")
			ws := s.Add("w")
			s.Add("x")
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			assert.ErrorIs(t, s.WaitReady(ctx, "slow"), context.DeadlineExceeded)
			assert.Equal(t, 5*time.Second, time.Since(start))

			h := s.Handler()
			ready := make(chan error, 1)
			go func() { ready <- s.WaitReady(t.Context(), "w") }()
			time.Sleep(time.Second)
			go func() { call(h, "GET", "w/"+ws+"/2018-06-01/runtime/invocation/next", "") }()
			assert.NoError(t, <-ready)
			s.Gone("w")

			go func() { ready <- s.WaitReady(t.Context(), "x") }()
			synctest.Wait()
			s.Gone("x")
			assert.ErrorIs(t, <-ready, runtimeapi.ErrGone)
			synctest.Wait()
		})
	})
	t.Run("unknown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := runtimeapi.New()
			start := time.Now()
			_, err := s.Invoke(t.Context(), "never-added", "arn", nil, start.Add(time.Hour))
			assert.ErrorIs(t, err, runtimeapi.ErrUndelivered)
			assert.ErrorIs(t, s.WaitReady(t.Context(), "never-added"), runtimeapi.ErrGone)
			assert.Zero(t, time.Since(start), "at once")
		})
	})
}

func TestEndpoint(t *testing.T) {
	assert.Equal(t, "127.0.0.1:9001/w/abc/s3cr3t", runtimeapi.Endpoint("127.0.0.1:9001", "abc", "s3cr3t"))
	assert.Equal(t, "runtimeapi: init error: x", fmt.Sprint(&runtimeapi.InitError{Payload: []byte("x")}))
}
