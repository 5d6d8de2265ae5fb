package leasehttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// gate is a lease.Gate the test opens and closes.
type gate struct{ closed bool }

func (g *gate) Overloaded() bool { return g.closed }

// fixture is a Handler on a memory Manager of budget 3, mounted at
// /leases/, whose holder is the X-Holder header.
type fixture struct {
	m    *lease.Manager
	h    *leasehttp.Handler
	gate *gate
	srv  http.Handler
}

func newFixture(t *testing.T, opts leasehttp.Options) *fixture {
	t.Helper()
	g := &gate{}
	m, err := lease.New(3, lease.Options{Gate: g, SweepInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close(context.Background())) })
	h, err := leasehttp.New(m, func(r *http.Request) (string, error) { return r.Header.Get("X-Holder"), nil }, opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/leases/", http.StripPrefix("/leases", h))
	return &fixture{m: m, h: h, gate: g, srv: mux}
}

// reply is one answer: status and decoded JSON body.
type reply struct {
	status int
	body   map[string]any
	header http.Header
}

func (f *fixture) do(t *testing.T, method, path, holder, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "http://127.0.0.1"+path, rd)
	if holder != "" {
		req.Header.Set("X-Holder", holder)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	r := reply{status: rec.Code, header: rec.Header()}
	if rec.Body.Len() > 0 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r.body), rec.Body.String())
	}
	return r
}

func (f *fixture) grant(t *testing.T, holder string, cost int) string {
	t.Helper()
	r := f.do(t, "POST", "/leases/", holder, `{"resource":"cam","cost":`+itoa(cost)+`}`)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	return r.body["lease_id"].(string)
}

// answer is the reply rec recorded.
func answer(t *testing.T, rec *httptest.ResponseRecorder) reply {
	t.Helper()
	r := reply{status: rec.Code, header: rec.Header()}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r.body), rec.Body.String())
	return r
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// requireProblem checks an error answer: status, code, and a message.
func requireProblem(t *testing.T, r reply, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.status, r.body)
	require.Equal(t, code, r.body["error_code"], r.body)
	require.NotEmpty(t, r.body["message"])
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
}

func TestGrantAnswersTheLease(t *testing.T) {
	f := newFixture(t, leasehttp.Options{})
	r := f.do(t, "POST", "/leases/", "alice", `{"resource":"cam_2f_19","cost":2,"fallback":[1]}`)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	id := r.body["lease_id"].(string)
	assert.Len(t, id, 32)
	assert.Equal(t, "cam_2f_19", r.body["resource"])
	assert.EqualValues(t, 2, r.body["cost"])
	assert.EqualValues(t, 1, r.body["token"])
	assert.EqualValues(t, 300, r.body["ttl_sec"])
	assert.EqualValues(t, 45, r.body["grace_sec"])
	exp, err := time.Parse(time.RFC3339Nano, r.body["expires_at"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(300*time.Second), exp, 5*time.Second)

	l, err := f.m.Get(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, "alice", l.Holder, "the holder is the request's, never the body's")

	// The fallback is taken when only one unit is left.
	r = f.do(t, "POST", "/leases/", "bob", `{"resource":"cam","cost":2,"fallback":[1]}`)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	assert.EqualValues(t, 1, r.body["cost"])

	r = f.do(t, "GET", "/leases/", "", "")
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, map[string]any{"budget": 3.0, "units": 3.0, "leases": 2.0, "available": 0.0}, r.body)
}

// TestRejectionsHaveStableCodes: each rule of a grant, in decision order,
// answers its code and status, and changes nothing.
func TestRejectionsHaveStableCodes(t *testing.T) {
	f := newFixture(t, leasehttp.Options{})
	f.grant(t, "alice", 2)
	requireProblem(t, f.do(t, "POST", "/leases/", "alice", `{"resource":"cam","cost":1}`), http.StatusConflict, "holder_has_lease")
	requireProblem(t, f.do(t, "POST", "/leases/", "bob", `{"resource":"cam","cost":2}`), http.StatusTooManyRequests, "over_capacity")
	f.gate.closed = true
	requireProblem(t, f.do(t, "POST", "/leases/", "alice", `{"resource":"cam","cost":1}`), http.StatusServiceUnavailable, "overloaded")
	_, n, err := f.m.Usage(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// TestBadInputChangesNothing: every malformed grant gets a 4xx and a code,
// and the store stays empty.
func TestBadInputChangesNothing(t *testing.T) {
	f := newFixture(t, leasehttp.Options{MaxBody: 64})
	for _, tc := range []struct {
		name, body, ctype string
		status            int
		code              string
	}{
		{"malformed", `{"resource":`, "application/json", 400, "bad_json"},
		{"not an object", `[1,2]`, "application/json", 400, "bad_json"},
		{"unknown field", `{"resource":"a","cost":1,"x":1}`, "application/json", 400, "bad_json"},
		{"trailing data", `{"resource":"a","cost":1} {}`, "application/json", 400, "bad_json"},
		{"empty", ``, "application/json", 400, "bad_json"},
		{"cost zero", `{"resource":"a","cost":0}`, "application/json", 400, "invalid_argument"},
		{"cost above budget", `{"resource":"a","cost":4}`, "application/json", 400, "invalid_argument"},
		{"too large", `{"resource":"` + strings.Repeat("a", 100) + `","cost":1}`, "application/json", 413, "body_too_large"},
		{"form", `resource=a&cost=1`, "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
		{"text", `{"resource":"a","cost":1}`, "text/plain", 415, "unsupported_media_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "http://127.0.0.1/leases/", strings.NewReader(tc.body))
			req.Header.Set("X-Holder", "alice")
			req.Header.Set("Content-Type", tc.ctype)
			rec := httptest.NewRecorder()
			f.srv.ServeHTTP(rec, req)
			var body map[string]any
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
			requireProblem(t, reply{rec.Code, body, rec.Header()}, tc.status, tc.code)
		})
	}
	requireProblem(t, f.do(t, "POST", "/leases/", "", `{"resource":"a","cost":1}`), http.StatusUnauthorized, "no_holder")
	_, n, err := f.m.Usage(t.Context())
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, f.m.Stats().Granted)
}

// TestOnlyTheHolderHeartbeatsAndReleases: another holder's heartbeat and
// release are refused with not_holder and leave the lease as it was.
func TestOnlyTheHolderHeartbeatsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, leasehttp.Options{})
		id := f.grant(t, "alice", 1)
		time.Sleep(10 * time.Second)
		requireProblem(t, f.do(t, "POST", "/leases/"+id+"/heartbeat", "mallory", ""), http.StatusForbidden, "not_holder")
		requireProblem(t, f.do(t, "DELETE", "/leases/"+id, "mallory", ""), http.StatusForbidden, "not_holder")
		requireProblem(t, f.do(t, "DELETE", "/leases/"+id, "", ""), http.StatusUnauthorized, "no_holder")
		l, err := f.m.Get(t.Context(), id)
		require.NoError(t, err, "the lease is still there")
		assert.Equal(t, l.CreatedAt, l.HeartbeatAt, "and was not heartbeaten")
		assert.Zero(t, f.m.Stats().Heartbeats)

		r := f.do(t, "POST", "/leases/"+id+"/heartbeat", "alice", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.Equal(t, map[string]any{"ok": true, "remaining_sec": 290.0, "live_sec": 45.0}, r.body)

		r = f.do(t, "DELETE", "/leases/"+id, "alice", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.Equal(t, map[string]any{"ok": true}, r.body)
		requireProblem(t, f.do(t, "DELETE", "/leases/"+id, "alice", ""), http.StatusNotFound, "not_found")
	})
}

// TestHeartbeatNearTheTTL: within the last grace of the TTL, remaining_sec
// is the store's exact time left, and a lease past its TTL answers expired,
// then not_found after a sweep.
func TestHeartbeatNearTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, leasehttp.Options{})
		id := f.grant(t, "alice", 1)
		for range 9 {
			time.Sleep(30 * time.Second)
			r := f.do(t, "POST", "/leases/"+id+"/heartbeat", "alice", "")
			require.Equal(t, http.StatusOK, r.status, r.body)
		}
		time.Sleep(20500 * time.Millisecond) // 290.5 s after the grant
		r := f.do(t, "POST", "/leases/"+id+"/heartbeat", "alice", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.EqualValues(t, 9, r.body["remaining_sec"])
		assert.InDelta(t, 9.5, r.body["live_sec"], 0.001)
		time.Sleep(10 * time.Second)
		requireProblem(t, f.do(t, "POST", "/leases/"+id+"/heartbeat", "alice", ""), http.StatusGone, "expired")
		_, err := f.m.Sweep(t.Context())
		require.NoError(t, err)
		requireProblem(t, f.do(t, "POST", "/leases/"+id+"/heartbeat", "alice", ""), http.StatusNotFound, "not_found")
	})
}

func TestUnknownAndOddIDs(t *testing.T) {
	f := newFixture(t, leasehttp.Options{})
	for _, id := range []string{"nope", strings.Repeat("a", 300), "%00"} {
		requireProblem(t, f.do(t, "POST", "/leases/"+id+"/heartbeat", "alice", ""), http.StatusNotFound, "not_found")
		requireProblem(t, f.do(t, "DELETE", "/leases/"+id, "alice", ""), http.StatusNotFound, "not_found")
	}
	r := f.do(t, "PUT", "/leases/x", "alice", "")
	assert.Equal(t, http.StatusMethodNotAllowed, r.status)
}

// TestErrorAnswersProblems: Error answers a *Problem of the server's own as
// it is, and ProblemFor gives the Problem of a lease error, which a server
// may rewrite (its own codes, its users' language) before Error sends it.
func TestErrorAnswersProblems(t *testing.T) {
	f := newFixture(t, leasehttp.Options{})
	req := httptest.NewRequest("POST", "http://127.0.0.1/leases/", nil)
	rec := httptest.NewRecorder()
	f.h.Error(rec, req, fmt.Errorf("decoding: %w", &leasehttp.Problem{Status: 404, Code: "UNKNOWN_CAMERA", Message: "no such camera"}))
	requireProblem(t, answer(t, rec), 404, "UNKNOWN_CAMERA")

	f.grant(t, "alice", 1)
	_, err := f.m.Grant(t.Context(), lease.Request{Holder: "alice", Cost: 1})
	p := leasehttp.ProblemFor(err)
	require.Equal(t, http.StatusConflict, p.Status)
	require.Equal(t, "holder_has_lease", p.Code)
	require.ErrorIs(t, p, lease.ErrHolderHasLease)
	p.Code, p.Message = "USER_ALREADY_HAS_MODAL", "既に別のカメラを表示中です"
	rec = httptest.NewRecorder()
	f.h.Error(rec, req, p)
	r := answer(t, rec)
	requireProblem(t, r, http.StatusConflict, "USER_ALREADY_HAS_MODAL")
	assert.Equal(t, "既に別のカメラを表示中です", r.body["message"])
	assert.Equal(t, "holder_has_lease", leasehttp.ProblemFor(err).Code, "ProblemFor returns a copy")
}

// TestHeld is the check of a guarded resource: the holder's live lease,
// else an error that Error answers.
func TestHeld(t *testing.T) {
	f := newFixture(t, leasehttp.Options{})
	id := f.grant(t, "alice", 1)
	req := func(holder string) *http.Request {
		r := httptest.NewRequest("GET", "http://127.0.0.1/stream", nil)
		r.Header.Set("X-Holder", holder)
		return r
	}
	l, err := f.h.Held(req("alice"), id)
	require.NoError(t, err)
	assert.Equal(t, id, l.ID)
	_, err = f.h.Held(req("bob"), id)
	require.ErrorIs(t, err, lease.ErrWrongHolder)
	_, err = f.h.Held(req("alice"), "nope")
	require.ErrorIs(t, err, lease.ErrNotFound)
	_, err = f.h.Held(req(""), id)
	rec := httptest.NewRecorder()
	f.h.Error(rec, req(""), err)
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
}

// TestStoreFailureIsInternal: an error that is no rule's answers 500
// internal without its text, and a closed Manager 503 unavailable.
func TestStoreFailureIsInternal(t *testing.T) {
	f := newFixture(t, leasehttp.Options{})
	rec := httptest.NewRecorder()
	f.h.Error(rec, httptest.NewRequest("GET", "/", nil), errors.New("dial tcp: secret-host:3306 refused"))
	assert.Equal(t, 500, rec.Code)
	assert.NotContains(t, rec.Body.String(), "secret-host")
	require.NoError(t, f.m.Close(t.Context()))
	requireProblem(t, f.do(t, "POST", "/leases/", "alice", `{"resource":"a","cost":1}`), 503, "unavailable")
}

func TestNewRefusesBadArguments(t *testing.T) {
	m, err := lease.New(1, lease.Options{SweepInterval: -1})
	require.NoError(t, err)
	defer func() { _ = m.Close(context.Background()) }()
	holder := func(*http.Request) (string, error) { return "x", nil }
	_, err = leasehttp.New(nil, holder, leasehttp.Options{})
	require.ErrorIs(t, err, leasehttp.ErrInvalid)
	_, err = leasehttp.New(m, nil, leasehttp.Options{})
	require.ErrorIs(t, err, leasehttp.ErrInvalid)
	_, err = leasehttp.New(m, holder, leasehttp.Options{MaxBody: -1})
	require.EqualError(t, err, "leasehttp: MaxBody (-1) is negative")
	require.ErrorIs(t, err, leasehttp.ErrInvalid)
}

func TestClientScript(t *testing.T) {
	rec := httptest.NewRecorder()
	leasehttp.ClientScript().ServeHTTP(rec, httptest.NewRequest("GET", "/leasehttp.js", nil))
	assert.Equal(t, 200, rec.Code)
	assert.Equal(t, "text/javascript; charset=utf-8", rec.Header().Get("Content-Type"))
	assert.Contains(t, rec.Body.String(), "export class LeaseClient")
	assert.Contains(t, rec.Body.String(), "visibilitychange")
}
