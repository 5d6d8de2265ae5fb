package leasehttp_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// BenchmarkLeaseHTTP: each op is one modal's life as a page lives it,
// through a real HTTP server on loopback: POST a grant, POST a heartbeat,
// DELETE the lease, by a new holder each time (one modal per holder). It
// reports requests per second and the p50/p99 latency of grants and
// heartbeats, with 8 goroutines a core.
//
//	store=memory/impl=ttlkit   one instance: lease.Manager + leasehttp
//	store=memory/impl=floor    one instance: the design's map behind a mutex
//	store=mysql2/impl=ttlkit   two instances sharing MySQL (TTLKIT_TEST_MYSQL_DSN), requests alternating between them
func BenchmarkLeaseHTTP(b *testing.B) {
	b.Run("store=memory/impl=ttlkit", func(b *testing.B) {
		m, err := lease.New(1<<30, lease.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close(context.Background()) })
		runCycles(b, serveTTLKit(b, m))
	})
	b.Run("store=memory/impl=floor", func(b *testing.B) {
		runCycles(b, serve(b, newFloor(1<<30)))
	})
	b.Run("store=mysql2/impl=ttlkit", func(b *testing.B) {
		my := mysqltest.OpenMySQL(b)
		var urls []string
		for i, db := range []*sql.DB{my.DB, my.NewDB(b)} {
			db.SetMaxOpenConns(32) // as the camera server does
			st, err := sqllease.NewMySQL(db, sqllease.Options{Table: "modal_leases"})
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				if err := st.Migrate(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			m, err := lease.New(1<<30, lease.Options{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = m.Close(context.Background()) })
			urls = append(urls, serveTTLKit(b, m)...)
		}
		runCycles(b, urls)
	})
}

// holderHeader carries the holder: the camera server takes it from a
// signed session cookie, which costs the same for every impl.
const holderHeader = "X-Holder"

func serveTTLKit(b *testing.B, m *lease.Manager) []string {
	h, err := leasehttp.New(m, func(r *http.Request) (string, error) { return r.Header.Get(holderHeader), nil }, leasehttp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/leases/", http.StripPrefix("/leases", h))
	return serve(b, mux)
}

func serve(b *testing.B, h http.Handler) []string {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return []string{srv.URL}
}

var holders atomic.Uint64

// runCycles runs b.N grant-heartbeat-release cycles against the servers
// at urls (alternating) and reports the figures.
func runCycles(b *testing.B, urls []string) {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 128}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	var mu sync.Mutex
	var grants, beats []time.Duration
	b.ReportAllocs()
	b.SetParallelism(8)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var g, h []time.Duration
		for pb.Next() {
			n := holders.Add(1)
			url := urls[n%uint64(len(urls))]
			holder := fmt.Sprintf("holder-%d", n)
			t0 := time.Now()
			var grant struct {
				LeaseID string `json:"lease_id"`
			}
			if err := call(client, "POST", url+"/leases/", holder, `{"resource":"cam_2f_19","cost":2,"fallback":[1]}`, http.StatusCreated, &grant); err != nil {
				b.Error(err)
				return
			}
			t1 := time.Now()
			if err := call(client, "POST", url+"/leases/"+grant.LeaseID+"/heartbeat", holder, "", http.StatusOK, nil); err != nil {
				b.Error(err)
				return
			}
			t2 := time.Now()
			if err := call(client, "DELETE", url+"/leases/"+grant.LeaseID, holder, "", http.StatusOK, nil); err != nil {
				b.Error(err)
				return
			}
			g, h = append(g, t1.Sub(t0)), append(h, t2.Sub(t1))
		}
		mu.Lock()
		grants, beats = append(grants, g...), append(beats, h...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(3*b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(grants, 50), "grant-p50-µs")
	b.ReportMetric(pct(grants, 99), "grant-p99-µs")
	b.ReportMetric(pct(beats, 50), "hb-p50-µs")
	b.ReportMetric(pct(beats, 99), "hb-p99-µs")
}

func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[(len(d)-1)*p/100].Microseconds())
}

func call(c *http.Client, method, url, holder, body string, want int, out any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set(holderHeader, holder)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
	if out != nil {
		return json.NewDecoder(res.Body).Decode(out)
	}
	_, err = io.Copy(io.Discard, res.Body)
	return err
}

// floor is the design's hand-written admission (§3, §4, §6) behind the
// same HTTP requests: one map of ModalLease behind a mutex, the holder
// rule and the budget by scanning it, and no more. It checks what the
// Handler checks (JSON, holder, ownership) and skips what it adds (an
// overload gate, fencing tokens, events, stats).
type floor struct {
	budget int
	mu     sync.Mutex
	leases map[string]*modalLease
}

type modalLease struct {
	id, user, camera string
	cost             int
	created, expires time.Time
	lastHeartbeat    time.Time
}

func newFloor(budget int) http.Handler {
	f := &floor{budget: budget, leases: map[string]*modalLease{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /leases/{$}", f.grant)
	mux.HandleFunc("POST /leases/{id}/heartbeat", f.heartbeat)
	mux.HandleFunc("DELETE /leases/{id}", f.release)
	return mux
}

func (f *floor) live(l *modalLease, now time.Time) bool {
	return now.Before(l.expires) && now.Sub(l.lastHeartbeat) <= 45*time.Second
}

func (f *floor) grant(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Resource string `json:"resource"`
		Cost     int    `json:"cost"`
		Fallback []int  `json:"fallback"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, 400, map[string]string{"error_code": "bad_json", "message": err.Error()})
		return
	}
	user := r.Header.Get(holderHeader)
	var idb [16]byte
	_, _ = rand.Read(idb[:])
	now := time.Now()
	f.mu.Lock()
	used := 0
	for _, l := range f.leases {
		if !f.live(l, now) {
			continue
		}
		if l.user == user {
			f.mu.Unlock()
			writeJSON(w, 409, map[string]string{"error_code": "holder_has_lease"})
			return
		}
		used += l.cost
	}
	cost := 0
	for _, c := range append([]int{req.Cost}, req.Fallback...) {
		if c <= f.budget-used {
			cost = c
			break
		}
	}
	if cost == 0 {
		f.mu.Unlock()
		writeJSON(w, 429, map[string]string{"error_code": "over_capacity"})
		return
	}
	l := &modalLease{id: hex.EncodeToString(idb[:]), user: user, camera: req.Resource, cost: cost,
		created: now, expires: now.Add(300 * time.Second), lastHeartbeat: now}
	f.leases[l.id] = l
	f.mu.Unlock()
	writeJSON(w, 201, map[string]any{"lease_id": l.id, "cost": cost, "expires_at": l.expires.UTC()})
}

var errNotYours = errors.New("not yours")

func (f *floor) owned(r *http.Request, now time.Time) (*modalLease, error) {
	l, ok := f.leases[r.PathValue("id")]
	if !ok || !f.live(l, now) {
		return nil, errors.New("not found")
	}
	if l.user != r.Header.Get(holderHeader) {
		return nil, errNotYours
	}
	return l, nil
}

func (f *floor) heartbeat(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	f.mu.Lock()
	l, err := f.owned(r, now)
	if err != nil {
		f.mu.Unlock()
		writeJSON(w, 404, map[string]string{"error_code": "not_found"})
		return
	}
	l.lastHeartbeat = now
	remaining := int(l.expires.Sub(now).Seconds())
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"ok": true, "remaining_sec": remaining})
}

func (f *floor) release(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	l, err := f.owned(r, time.Now())
	if err != nil {
		f.mu.Unlock()
		writeJSON(w, 404, map[string]string{"error_code": "not_found"})
		return
	}
	delete(f.leases, l.id)
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"ok": true})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
