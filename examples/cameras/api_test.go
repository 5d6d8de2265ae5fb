package main

import (
	"context"
	"fmt"
	"image/jpeg"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
)

// storeCase opens two backends on one store, as two instances have.
type storeCase struct {
	name string
	open func(t *testing.T) (a, b Backend)
}

// stores are every store the server runs on: memory always, MySQL,
// PostgreSQL and Redis with their TTLKIT_TEST_* variables (see
// internal/testenv).
var stores = []storeCase{
	{"memory", func(t *testing.T) (Backend, Backend) {
		store, seats, h := lease.NewMemoryStore(nil), lease.NewMemoryStore(nil), &memoryHistory{}
		return Backend{Leases: store, Seats: seats, History: h}, Backend{Leases: store, Seats: seats, History: h}
	}},
	{"mysql", func(t *testing.T) (Backend, Backend) {
		m := mysqltest.OpenMySQL(t)
		second := m.NewDB(t)
		for _, db := range []interface{ SetMaxOpenConns(int) }{m.DB, second} {
			db.SetMaxOpenConns(16)
		}
		a, err := mysqlBackend(t.Context(), m.DB, 1)
		require.NoError(t, err)
		b, err := mysqlBackend(t.Context(), second, 1)
		require.NoError(t, err)
		return a, b
	}},
	{"postgres", func(t *testing.T) (Backend, Backend) {
		pg := pgtest.OpenPostgres(t)
		a, err := postgresBackend(t.Context(), pg.Pool)
		require.NoError(t, err)
		b, err := postgresBackend(t.Context(), pg.NewPool(t))
		require.NoError(t, err)
		return a, b
	}},
	{"redis", func(t *testing.T) (Backend, Backend) {
		r := redistest.OpenRedis(t)
		prefix := r.Prefix + "{cams}:" // under the test's prefix, so its keys are removed
		a, err := redisBackend(t.Context(), r.Client, prefix)
		require.NoError(t, err)
		b, err := redisBackend(t.Context(), r.NewClient(t), prefix)
		require.NoError(t, err)
		return a, b
	}},
}

// serve starts an instance on backend behind a real HTTP server.
func serve(t *testing.T, cfg Config, backend Backend) (*Server, *fakeLoad, string) {
	t.Helper()
	srv, load := newServer(t, cfg, backend)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.StopStreams) // before ts.Close, which waits for streams
	return srv, load, ts.URL
}

// TestAPI drives the design's API (§8) through net/http on every store.
func TestAPI(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			backend, _ := sc.open(t)
			srv, load, url := serve(t, testConfig(), backend)
			alice, bob := overHTTP(t, url), overHTTP(t, url)

			// §8.1 grant.
			a := alice.grant("cam_2f_19", "sub")
			require.Equal(t, http.StatusCreated, a.Status, a.Body)
			id := a.str("lease_id")
			assert.Len(t, id, 32)
			assert.Equal(t, "sub", a.Body["allowed_quality"])
			assert.Equal(t, "/stream/cam_2f_19?lease_id="+id, a.Body["stream_url"])
			exp, err := time.Parse(time.RFC3339Nano, a.str("expires_at"))
			require.NoError(t, err)
			assert.WithinDuration(t, time.Now().Add(300*time.Second), exp, 5*time.Second)
			cookie := a.Header.Get("Set-Cookie")
			assert.Contains(t, cookie, "HttpOnly")
			assert.Contains(t, cookie, "SameSite=Lax")

			// §8.2 heartbeat.
			a = alice.heartbeat(id)
			require.Equal(t, http.StatusOK, a.Status, a.Body)
			assert.Equal(t, true, a.Body["ok"])
			assert.InDelta(t, 299, a.Body["remaining_sec"], 2)

			// One modal per user.
			requireRefusal(t, alice.grant("cam_1f_01", "main"), http.StatusConflict, CodeUserAlreadyHasModal, MsgUserAlreadyHasModal)

			// Another session can neither heartbeat nor release it, nor
			// watch its stream.
			requireRefusal(t, bob.heartbeat(id), http.StatusForbidden, "NOT_YOUR_LEASE", "")
			requireRefusal(t, bob.release(id), http.StatusForbidden, "NOT_YOUR_LEASE", "")
			requireRefusal(t, bob.do("GET", "/stream/cam_2f_19?lease_id="+id, "", ""), http.StatusForbidden, "NOT_YOUR_LEASE", "")
			requireRefusal(t, alice.do("GET", "/stream/cam_1f_01?lease_id="+id, "", ""), http.StatusForbidden, "LEASE_CAMERA_MISMATCH", "")
			l, err := srv.leases.Get(t.Context(), id)
			require.NoError(t, err, "still there")
			assert.EqualValues(t, 1, srv.leases.Stats().Heartbeats, "only alice's heartbeat counted")
			_ = l

			// The stream plays real JPEG frames for alice, and ends when
			// she releases the lease.
			srv.streams.frames.draw = drawFrame
			res, err := alice.client.Get(url + "/stream/cam_2f_19?lease_id=" + id)
			require.NoError(t, err)
			defer res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			mt, params, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
			require.NoError(t, err)
			require.Equal(t, "multipart/x-mixed-replace", mt)
			mr := multipart.NewReader(res.Body, params["boundary"])
			for range 2 {
				part, err := mr.NextPart()
				require.NoError(t, err)
				img, err := jpeg.Decode(part)
				require.NoError(t, err)
				assert.Equal(t, 320, img.Bounds().Dx(), "a sub stream")
			}
			a = alice.release(id)
			require.Equal(t, http.StatusOK, a.Status, a.Body)
			assert.Equal(t, map[string]any{"ok": true}, a.Body)
			ended := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, res.Body)
				ended <- err
			}()
			select {
			case err := <-ended:
				require.NoError(t, err, "the stream ends cleanly")
			case <-time.After(3 * time.Second):
				t.Fatal("the stream goes on after the release")
			}
			requireRefusal(t, alice.release(id), http.StatusNotFound, "LEASE_NOT_FOUND", "")
			requireRefusal(t, alice.heartbeat(id), http.StatusNotFound, "LEASE_NOT_FOUND", "")

			// Bad input: a 4xx with a clear error_code, and nothing changes.
			granted := srv.leases.Stats().Granted
			for _, tc := range []struct {
				name, ctype, body string
				status            int
				code              string
			}{
				{"unknown camera", "application/json", `{"camera_id":"cam_9z_99","quality":"sub"}`, 404, "UNKNOWN_CAMERA"},
				{"bad quality", "application/json", `{"camera_id":"cam_2f_19","quality":"4k"}`, 400, "INVALID_QUALITY"},
				{"missing quality", "application/json", `{"camera_id":"cam_2f_19"}`, 400, "INVALID_QUALITY"},
				{"malformed JSON", "application/json", `{"camera_id":"cam_2f_19",`, 400, "BAD_JSON"},
				{"unknown field", "application/json", `{"camera_id":"cam_2f_19","quality":"sub","user_id":"x"}`, 400, "BAD_JSON"},
				{"oversized body", "application/json", `{"camera_id":"` + strings.Repeat("a", 2000) + `","quality":"sub"}`, 413, "BODY_TOO_LARGE"},
				{"not JSON", "text/plain", `{"camera_id":"cam_2f_19","quality":"sub"}`, 415, "UNSUPPORTED_MEDIA_TYPE"},
			} {
				requireRefusal(t, bob.do("POST", "/api/modal/lease", tc.ctype, tc.body), tc.status, tc.code, "")
			}
			requireRefusal(t, bob.heartbeat("0123456789abcdef0123456789abcdef"), 404, "LEASE_NOT_FOUND", "")
			requireRefusal(t, bob.release("no-such-lease"), 404, "LEASE_NOT_FOUND", "")
			requireRefusal(t, bob.do("GET", "/stream/cam_2f_19?lease_id=nope", "", ""), 404, "LEASE_NOT_FOUND", "")
			assert.Equal(t, http.StatusMethodNotAllowed, bob.do("PUT", "/api/modal/lease", "", "").Status)
			assert.Equal(t, granted, srv.leases.Stats().Granted)
			u, err := usageOf(t.Context(), srv.leases)
			require.NoError(t, err)
			assert.Zero(t, u.Leases)

			// The main stream falls back to sub when one unit is left.
			for range 17 {
				overHTTP(t, url).mustGrant("cam_1f_01", "main")
			}
			a = bob.grant("cam_1f_02", "main")
			require.Equal(t, http.StatusCreated, a.Status, a.Body)
			assert.Equal(t, "sub", a.Body["allowed_quality"])
			requireRefusal(t, alice.grant("cam_1f_02", "sub"), http.StatusTooManyRequests, CodeOverCapacity, MsgOverCapacity)

			// §8.4 status.
			_, err = srv.monitor.Step(t.Context()) // the first sample, without waiting for the loop's
			require.NoError(t, err)
			s := alice.status()
			require.Equal(t, http.StatusOK, s.Status)
			for _, k := range []string{"healthy", "cpu_percent", "memory_percent", "active_modals", "modal_budget_remaining", "suggest_active"} {
				assert.Contains(t, s.Body, k)
			}
			assert.Equal(t, true, s.Body["healthy"])
			assert.EqualValues(t, 20, s.Body["cpu_percent"])
			assert.EqualValues(t, 18, s.Body["active_modals"])
			assert.EqualValues(t, 0, s.Body["modal_budget_remaining"])

			// Overload refuses first.
			load.set(95, 40)
			_, err = srv.monitor.Step(t.Context())
			require.NoError(t, err)
			requireRefusal(t, alice.grant("cam_1f_02", "sub"), http.StatusServiceUnavailable, CodeSystemOverload, MsgSystemOverload)
			assert.Equal(t, false, alice.status().Body["healthy"])

			// admission_metrics, on this store.
			_, err = srv.recorder.Record(t.Context())
			require.NoError(t, err)
			m := alice.do("GET", "/api/system/metrics?minutes=5", "", "")
			require.Equal(t, http.StatusOK, m.Status, m.Body)
			points := m.Body["points"].([]any)
			require.NotEmpty(t, points)
			last := points[len(points)-1].(map[string]any)
			assert.EqualValues(t, 18, last["active_modals"])
			assert.GreaterOrEqual(t, last["requests"], 21.0)
			assert.GreaterOrEqual(t, last["rejections"], 3.0)
			requireRefusal(t, alice.do("GET", "/api/system/metrics?minutes=0", "", ""), 400, "INVALID_ARGUMENT", "")

			// Operations.
			h := alice.do("GET", "/healthz", "", "")
			assert.Equal(t, http.StatusOK, h.Status)
			res2, err := alice.client.Get(url + "/metrics")
			require.NoError(t, err)
			body, _ := io.ReadAll(res2.Body)
			res2.Body.Close()
			assert.Contains(t, string(body), `cameras_lease_rejections_total{reason="over_capacity"} 1`)
			assert.Contains(t, string(body), "cameras_lease_budget_units 35")
			assert.Contains(t, string(body), `cameras_lease_rejections_total{reason="overloaded"} 1`)
			assert.Contains(t, string(body), `cameras_overload_state{state="overloaded"} 1`)
			assert.Contains(t, string(body), `cameras_overload_state{state="normal"} 0`)
			assert.Contains(t, string(body), "cameras_overload_trips_total 1")
			assert.Contains(t, string(body), "cameras_healthy 0")
		})
	}
}

// TestHistory keeps admission_metrics on every store: rows round-trip,
// and a purge removes exactly the rows older than its cutoff.
func TestHistory(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			backend, _ := sc.open(t)
			h, ctx := backend.History, t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			rows := []Row{
				{RecordedAt: now.Add(-25 * time.Hour), ActiveModals: 1, CPUPercent: 12.5, MemoryPercent: 40, RequestsTotal: 3, RejectionsTotal: 1},
				{RecordedAt: now.Add(-time.Hour), ActiveModals: 7, ActiveSuggest: true, CPUPercent: 85.25, MemoryPercent: 70.5, RequestsTotal: 10, RejectionsTotal: 2},
				{RecordedAt: now, ActiveModals: 35, ActiveSuggest: true, CPUPercent: 99.99, MemoryPercent: 0, RequestsTotal: 0, RejectionsTotal: 0},
			}
			for _, r := range rows {
				require.NoError(t, h.Record(ctx, r))
			}
			got, err := h.Since(ctx, now.Add(-48*time.Hour))
			require.NoError(t, err)
			require.Equal(t, rows, got)
			n, err := h.Purge(ctx, now.Add(-24*time.Hour))
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			got, err = h.Since(ctx, time.Time{})
			require.NoError(t, err)
			assert.Equal(t, rows[1:], got)
			got, err = h.Since(ctx, now.Add(-time.Minute))
			require.NoError(t, err)
			assert.Equal(t, rows[2:], got)
		})
	}
}

// TestTwoInstancesShareTheBudget: two instances on one store, 200 users
// at once on both, each opening, heartbeating (on either instance: the
// session is theirs on both) and closing modals. Modal usage, read from the
// store by an auditor all along, never exceeds the 35 units.
func TestTwoInstancesShareTheBudget(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			ba, bb := sc.open(t)
			srvA, _, urlA := serve(t, testConfig(), ba)
			srvB, _, urlB := serve(t, testConfig(), bb)
			ctx, stop := context.WithCancel(t.Context())
			var maxUnits, audits atomic.Int64
			auditDone := make(chan struct{})
			go func() {
				defer close(auditDone)
				for ctx.Err() == nil {
					u, err := usageOf(ctx, srvA.leases)
					if err == nil {
						audits.Add(1)
						for {
							m := maxUnits.Load()
							if int64(u.Units) <= m || maxUnits.CompareAndSwap(m, int64(u.Units)) {
								break
							}
						}
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()

			var granted, overCapacity, crossHeartbeats atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 200 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					onA := overHTTP(t, urlA)
					onA.status() // the session cookie
					onB := onA.on(urlB)
					inst := [2]*user{onA, onB}
					<-start
					// Three rounds each, and more until the auditor has read
					// the usage 20 times while users come and go: on a slow
					// machine three rounds can end before it has.
					for round := 0; round < 3 || (audits.Load() < 20 && round < 100); round++ {
						me := inst[(i+round)%2]
						a := me.grant(fmt.Sprintf("cam_1f_0%d", 1+i%4), []string{"sub", "main"}[(i+round)%2])
						switch a.Status {
						case http.StatusCreated:
							granted.Add(1)
						case http.StatusTooManyRequests:
							overCapacity.Add(1)
							time.Sleep(time.Duration(i%7) * time.Millisecond)
							continue
						default:
							t.Errorf("grant: %d %v", a.Status, a.Body)
							return
						}
						id := a.str("lease_id")
						other := inst[(i+round+1)%2]
						if hb := other.heartbeat(id); hb.Status == http.StatusOK {
							crossHeartbeats.Add(1)
						} else {
							t.Errorf("heartbeat on the other instance: %d %v", hb.Status, hb.Body)
						}
						time.Sleep(time.Duration(i%13) * time.Millisecond)
						if r := inst[round%2].release(id); r.Status != http.StatusOK {
							t.Errorf("release: %d %v", r.Status, r.Body)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			stop()
			<-auditDone
			t.Logf("%s: %d granted, %d over capacity, %d cross-instance heartbeats, %d audits, max %d units",
				sc.name, granted.Load(), overCapacity.Load(), crossHeartbeats.Load(), audits.Load(), maxUnits.Load())
			assert.LessOrEqual(t, maxUnits.Load(), int64(35), "modal usage above the budget")
			assert.Greater(t, audits.Load(), int64(10))
			assert.Greater(t, granted.Load(), int64(35), "more grants than fit at once")
			sa, sb := srvA.leases.Stats(), srvB.leases.Stats()
			assert.Positive(t, sa.Granted)
			assert.Positive(t, sb.Granted)
			assert.Equal(t, uint64(granted.Load()), sa.Granted+sb.Granted)
			u, err := usageOf(t.Context(), srvB.leases)
			require.NoError(t, err)
			assert.Zero(t, u.Units, "every modal was closed")
		})
	}
}
