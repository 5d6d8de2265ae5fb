package main

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/hysteresis/sysload"
	"github.com/ttlkit/ttlkit/lease"
)

// Row is one row of admission_metrics (design §7.2): the state of admission
// when it was recorded, and the lease requests and rejections of this
// instance since its previous row (so that summing rows gives totals, over
// any period and any number of instances).
type Row struct {
	RecordedAt      time.Time `json:"recorded_at"`
	ActiveModals    int       `json:"active_modals"`
	ActiveSuggest   bool      `json:"active_suggest"`
	CPUPercent      float64   `json:"cpu_percent"`
	MemoryPercent   float64   `json:"memory_percent"`
	RequestsTotal   int       `json:"requests_total"`
	RejectionsTotal int       `json:"rejections_total"`
}

// History keeps admission_metrics: in memory, or in the store's database
// (the design's table on MySQL and PostgreSQL, a sorted set on Redis), where
// every instance writes its rows.
type History interface {
	// Record adds a row.
	Record(ctx context.Context, r Row) error
	// Since returns the rows recorded at or after t, oldest first.
	Since(ctx context.Context, t time.Time) ([]Row, error)
	// Purge deletes the rows recorded before t and returns how many.
	Purge(ctx context.Context, before time.Time) (int, error)
}

// memoryHistory is History in a slice, oldest first.
type memoryHistory struct {
	mu   sync.Mutex
	rows []Row
}

func (h *memoryHistory) Record(_ context.Context, r Row) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.rows), func(i int) bool { return h.rows[i].RecordedAt.After(r.RecordedAt) })
	h.rows = append(h.rows, Row{})
	copy(h.rows[i+1:], h.rows[i:])
	h.rows[i] = r
	return nil
}

func (h *memoryHistory) Since(_ context.Context, t time.Time) ([]Row, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.rows), func(i int) bool { return !h.rows[i].RecordedAt.Before(t) })
	return append([]Row(nil), h.rows[i:]...), nil
}

func (h *memoryHistory) Purge(_ context.Context, before time.Time) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.rows), func(i int) bool { return !h.rows[i].RecordedAt.Before(before) })
	// Copy what is kept, so the dropped rows' array is freed.
	h.rows = append(make([]Row, 0, len(h.rows)-i), h.rows[i:]...)
	return i, nil
}

// Recorder writes a row of admission_metrics every MetricsInterval and
// purges rows older than MetricsRetention every MetricsPurgeInterval
// (design §10.1: hourly, 24 h), on one goroutine that Close stops.
type Recorder struct {
	cfg     Config
	history History
	leases  *lease.Manager
	monitor *sysload.Monitor // nil when the load is not measured
	adm     *Admission
	log     *slog.Logger

	mu           sync.Mutex
	lastRequests uint64
	lastRejected uint64

	cancel context.CancelFunc
	done   chan struct{}
}

// NewRecorder starts the recorder.
func NewRecorder(cfg Config, h History, adm *Admission, log *slog.Logger) *Recorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{cfg: cfg, history: h, leases: adm.leases, monitor: adm.monitor, adm: adm, log: log,
		cancel: cancel, done: make(chan struct{})}
	go r.loop(ctx)
	return r
}

func (r *Recorder) loop(ctx context.Context) {
	defer close(r.done)
	rec := time.NewTicker(r.cfg.MetricsInterval)
	defer rec.Stop()
	purge := time.NewTicker(r.cfg.MetricsPurgeInterval)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rec.C:
			if _, err := r.Record(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cameras: recording admission_metrics", "err", err)
			}
		case <-purge.C:
			if n, err := r.Purge(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cameras: purging admission_metrics", "err", err)
			} else if n > 0 {
				r.log.Debug("cameras: purged admission_metrics", "rows", n)
			}
		}
	}
}

// requests returns the lease requests this instance has decided and how
// many it rejected, since it started.
func requests(s lease.Stats) (total, rejected uint64) {
	rejected = s.RejectedOverloaded + s.RejectedHolderHasLease + s.RejectedOverCapacity
	return s.Granted + rejected, rejected
}

// Record writes one row now: the loop's step.
func (r *Recorder) Record(ctx context.Context) (Row, error) {
	_, modals, err := r.leases.Usage(ctx)
	if err != nil {
		return Row{}, err
	}
	users := r.adm.sessions.Active()
	if r.adm.seats != nil {
		if users, err = r.adm.seats.Users(ctx); err != nil {
			return Row{}, err
		}
	}
	row := Row{RecordedAt: time.Now().UTC().Truncate(time.Millisecond), ActiveModals: modals,
		ActiveSuggest: r.adm.suggestActive(users)}
	if r.monitor != nil {
		last := r.monitor.Stats().Last
		row.CPUPercent, row.MemoryPercent = round2(last.CPU), round2(last.Memory)
	}
	r.mu.Lock()
	total, rejected := requests(r.leases.Stats())
	row.RequestsTotal, row.RejectionsTotal = int(total-r.lastRequests), int(rejected-r.lastRejected)
	r.lastRequests, r.lastRejected = total, rejected
	r.mu.Unlock()
	return row, r.history.Record(ctx, row)
}

// Purge deletes the rows older than MetricsRetention: the purge's step.
func (r *Recorder) Purge(ctx context.Context) (int, error) {
	return r.history.Purge(ctx, time.Now().Add(-r.cfg.MetricsRetention))
}

// Close stops the loop and waits for it.
func (r *Recorder) Close() {
	r.cancel()
	<-r.done
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// Point is one bucket of the status panel's sparklines: the rows of every
// instance recorded in one MetricsInterval.
type Point struct {
	T            time.Time `json:"t"`
	ActiveModals int       `json:"active_modals"` // the largest of the bucket
	Requests     int       `json:"requests"`
	Rejections   int       `json:"rejections"`
	CPUPercent   float64   `json:"cpu_percent"` // the largest of the bucket
}

// buckets groups rows by interval.
func buckets(rows []Row, interval time.Duration) []Point {
	var out []Point
	for _, r := range rows {
		t := r.RecordedAt.Truncate(interval)
		if n := len(out); n > 0 && out[n-1].T.Equal(t) {
			p := &out[n-1]
			p.ActiveModals = max(p.ActiveModals, r.ActiveModals)
			p.Requests += r.RequestsTotal
			p.Rejections += r.RejectionsTotal
			p.CPUPercent = max(p.CPUPercent, r.CPUPercent)
			continue
		}
		out = append(out, Point{T: t, ActiveModals: r.ActiveModals, Requests: r.RequestsTotal, Rejections: r.RejectionsTotal, CPUPercent: r.CPUPercent})
	}
	return out
}
