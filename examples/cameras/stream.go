package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// recheckEvery bounds how long a stream goes without asking the store
// whether its lease is still live: a lease released through another
// instance ends its streams here within this time. Releases through this
// instance, a lease superseded by its holder's next one, and deadlines
// (TTL, missed heartbeats) end them at once.
const recheckEvery = time.Second

// suggestEvery is how long the suggest stream shows one camera.
const suggestEvery = 10 * time.Second

// Streams serves the cameras' pictures: the modal streams that leases
// guard, the suggest stream and the grid's snapshots. It knows every modal
// stream it serves, by lease and by holder, to end them when their lease
// ends.
type Streams struct {
	leases  *lease.Manager
	api     API
	cameras []string
	cfg     Config
	log     *slog.Logger
	frames  frameCache

	base context.Context // cancelled by StopAll: ends every stream
	stop context.CancelFunc

	mu       sync.Mutex
	byLease  map[string]map[*modalStream]struct{}
	byHolder map[string]map[*modalStream]struct{}
	bySeat   map[string]map[*modalStream]struct{} // suggest streams by UI user seat
	seats    *Seats                               // nil when suggest streams are off

	activeMain, activeSub, activeSuggest atomic.Int64
	framesSent                           atomic.Uint64
}

// modalStream is a stream guarded by a lease: a modal's, or a suggest
// stream's UI user seat.
type modalStream struct {
	lease, holder string
	cancel        context.CancelCauseFunc
}

// Why a stream ended, besides its client leaving.
var (
	errLeaseEnded      = errors.New("lease ended")
	errLeaseSuperseded = errors.New("lease superseded by the holder's next one")
	errShutdown        = errors.New("server shutting down")
	errSeatLost        = errors.New("UI user seat ended")
)

// NewStreams returns Streams over the leases of m, checked through api.
func NewStreams(cfg Config, m *lease.Manager, api API, log *slog.Logger) *Streams {
	base, stop := context.WithCancel(context.Background())
	return &Streams{
		leases: m, api: api, cameras: cfg.Cameras, cfg: cfg, log: log,
		base: base, stop: stop, frames: frameCache{draw: drawFrame},
		byLease: map[string]map[*modalStream]struct{}{}, byHolder: map[string]map[*modalStream]struct{}{},
		bySeat: map[string]map[*modalStream]struct{}{},
	}
}

// Camera reports whether id is one of the cameras.
func (s *Streams) Camera(id string) bool { return slices.Contains(s.cameras, id) }

// End ends the streams of lease id at once.
func (s *Streams) End(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.byLease[id] {
		st.cancel(errLeaseEnded)
	}
}

// Supersede ends the streams of holder's leases other than id: a holder
// watches one modal at a time.
func (s *Streams) Supersede(holder, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.byHolder[holder] {
		if st.lease != id {
			st.cancel(errLeaseSuperseded)
		}
	}
}

// StopAll ends every stream, for a graceful shutdown (streams never go
// idle by themselves).
func (s *Streams) StopAll() { s.stop() }

// tracked returns how many modal streams are registered.
func (s *Streams) tracked() (leases, holders int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byLease), len(s.byHolder)
}

func (s *Streams) register(st *modalStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	add := func(m map[string]map[*modalStream]struct{}, k string) {
		if m[k] == nil {
			m[k] = map[*modalStream]struct{}{}
		}
		m[k][st] = struct{}{}
	}
	add(s.byLease, st.lease)
	add(s.byHolder, st.holder)
}

func (s *Streams) unregister(st *modalStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	del := func(m map[string]map[*modalStream]struct{}, k string) {
		delete(m[k], st)
		if len(m[k]) == 0 {
			delete(m, k)
		}
	}
	del(s.byLease, st.lease)
	del(s.byHolder, st.holder)
}

// Modal serves GET /stream/{camera_id}?lease_id=...: the camera's stream in
// the quality its lease was granted, only to the lease's holder, for as
// long as the lease lives.
func (s *Streams) Modal() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cam, id := r.PathValue("camera_id"), r.URL.Query().Get("lease_id")
		if !s.Camera(cam) {
			s.api.Error(w, r, unknownCamera(r, cam))
			return
		}
		l, err := s.api.Held(r, id)
		if err != nil {
			s.api.Error(w, r, err)
			return
		}
		if l.Resource != cam {
			s.api.Error(w, r, problem(r, http.StatusForbidden, "LEASE_CAMERA_MISMATCH", cam))
			return
		}
		q := qualityOf(s.cfg, l.Cost)
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		stopOnShutdown := context.AfterFunc(s.base, func() { cancel(errShutdown) })
		defer stopOnShutdown()
		st := &modalStream{lease: l.ID, holder: l.Holder, cancel: cancel}
		s.register(st)
		defer s.unregister(st)
		active := &s.activeSub
		if q == Main {
			active = &s.activeMain
		}
		active.Add(1)
		defer active.Add(-1)

		_, _, fps := q.size()
		// No frame goes out after the lease's deadline: at the deadline
		// (or every recheckEvery) the store says whether a heartbeat moved
		// it, and a dead lease ends the stream.
		deadline := l.Deadline()
		check := time.NewTimer(untilCheck(l))
		defer check.Stop()
		recheck := func() error {
			l, err := s.leases.Get(ctx, id)
			if err != nil {
				return err
			}
			// At least a moment ahead, even when the clocks of this server
			// and the store disagree.
			deadline = l.Deadline()
			if soon := time.Now().Add(5 * time.Millisecond); deadline.Before(soon) {
				deadline = soon
			}
			check.Reset(untilCheck(l))
			return nil
		}
		err = s.serveMJPEG(ctx, w, fps, func(now time.Time) ([]byte, error) {
			if !now.Before(deadline) {
				if err := recheck(); err != nil {
					return nil, err
				}
			}
			return s.frames.get(cam, q, now), nil
		}, check.C, recheck, nil)
		s.log.Debug("cameras: modal stream ended", "camera", cam, "quality", q, "lease", id,
			"why", errors.Join(err, context.Cause(ctx)))
	})
}

// Suggest serves GET /stream/suggest?seat=...: the suggest stream, a sub
// stream that moves to the next camera every suggestEvery. The design
// reserves one sub stream per UI user for it, so it is served only to a
// session that holds a UI user seat (seats.go): the one ?seat= names, or the
// one it holds or can take now; with every seat taken it is refused with
// UI_USERS_FULL. It heartbeats its seat while it plays and ends with it.
func (s *Streams) Suggest() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Suggest || s.seats == nil {
			s.api.Error(w, r, problem(r, http.StatusNotFound, "SUGGEST_DISABLED"))
			return
		}
		holder, err := Holder(r)
		if err != nil {
			s.api.Error(w, r, problem(r, http.StatusUnauthorized, "NO_SESSION"))
			return
		}
		seat, err := s.seats.Take(r.Context(), holder, r.URL.Query().Get("seat"))
		if errors.Is(err, errSeatsFull) {
			s.api.Error(w, r, problem(r, http.StatusTooManyRequests, CodeUIUsersFull, s.seats.Max()))
			return
		}
		if err != nil {
			s.api.Error(w, r, err)
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		defer context.AfterFunc(s.base, func() { cancel(errShutdown) })()
		st := &modalStream{lease: seat.ID, holder: holder, cancel: cancel}
		s.registerSuggest(st, true)
		defer s.registerSuggest(st, false)
		ka := s.seats.KeepAlive(ctx, seat)
		defer func() { _ = ka.Close(context.Background()) }()
		s.activeSuggest.Add(1)
		defer s.activeSuggest.Add(-1)
		// The stream ends the moment its KeepAlive stops trusting the
		// seat, which is before the store would give the seat to another.
		err = s.serveMJPEG(ctx, w, 2, func(now time.Time) ([]byte, error) {
			return s.frames.get(s.cameras[int(now.Unix()/int64(suggestEvery/time.Second))%len(s.cameras)], Sub, now), nil
		}, nil, nil, ka.Done())
		s.log.Debug("cameras: suggest stream ended", "seat", seat.ID, "why", errors.Join(err, context.Cause(ctx)))
	})
}

// EndSuggest ends the suggest streams of seat id at once; with a holder,
// only the streams of that holder.
func (s *Streams) EndSuggest(id string, holder ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.bySeat[id] {
		if len(holder) == 0 || st.holder == holder[0] {
			st.cancel(errSeatLost)
		}
	}
}

func (s *Streams) registerSuggest(st *modalStream, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.bySeat[st.lease] == nil {
			s.bySeat[st.lease] = map[*modalStream]struct{}{}
		}
		s.bySeat[st.lease][st] = struct{}{}
		return
	}
	delete(s.bySeat[st.lease], st)
	if len(s.bySeat[st.lease]) == 0 {
		delete(s.bySeat, st.lease)
	}
}

// Snapshot serves GET /api/cameras/{camera_id}/snapshot: a thumbnail of
// the camera now, from the baseline patrol stream (reserved units, no
// lease).
func (s *Streams) Snapshot() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cam := r.PathValue("camera_id")
		if !s.Camera(cam) {
			s.api.Error(w, r, unknownCamera(r, cam))
			return
		}
		w.Header().Set("Content-Type", "image/jpeg")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(s.frames.get(cam, thumb, time.Now()))
	})
}

// untilCheck is how long a stream of l may run before it asks the store
// again: until l's deadline (a heartbeat may have moved it), at most
// recheckEvery, and not less than a few milliseconds even when the clocks
// of the server and the store disagree.
func untilCheck(l lease.Lease) time.Duration {
	return max(5*time.Millisecond, min(recheckEvery, time.Until(l.Deadline())))
}

// serveMJPEG writes frames as multipart/x-mixed-replace, fps a second,
// until ctx ends, the client goes, stop is closed, or frame or onWake
// (called whenever wake fires) returns an error.
func (s *Streams) serveMJPEG(ctx context.Context, w http.ResponseWriter, fps int, frame func(time.Time) ([]byte, error), wake <-chan time.Time, onWake func() error, stop <-chan struct{}) error {
	h := w.Header()
	h.Set("Content-Type", "multipart/x-mixed-replace; boundary=frame")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	rc := http.NewResponseController(w)
	tick := time.NewTicker(time.Second / time.Duration(fps))
	defer tick.Stop()
	for {
		jpg, err := frame(time.Now())
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second)) // a stuck client is dropped
		if _, err := fmt.Fprintf(w, "--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n%s\r\n", len(jpg), jpg); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
		s.framesSent.Add(1)
	wait:
		for {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-stop:
				return errSeatLost
			case <-tick.C:
				break wait
			case <-wake:
				if err := onWake(); err != nil {
					return err
				}
			}
		}
	}
}

// qualityOf is the quality a lease of cost units was granted.
func qualityOf(cfg Config, cost int) Quality {
	if cost == cfg.MainStreamCost {
		return Main
	}
	return Sub
}

// frameCache shares the drawing of a frame among every viewer of a camera.
type frameCache struct {
	draw func(cam string, q Quality, t time.Time) []byte // drawFrame; tests draw less

	mu sync.Mutex
	m  map[frameKey]cachedFrame
}

type frameKey struct {
	cam string
	q   Quality
}

type cachedFrame struct {
	at  time.Time
	jpg []byte
}

func (c *frameCache) get(cam string, q Quality, now time.Time) []byte {
	_, _, fps := q.size()
	at := now.Truncate(time.Second / time.Duration(fps))
	k := frameKey{cam, q}
	c.mu.Lock()
	f, ok := c.m[k]
	c.mu.Unlock()
	if ok && f.at.Equal(at) {
		return f.jpg
	}
	jpg := c.draw(cam, q, now)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[frameKey]cachedFrame{}
	}
	c.m[k] = cachedFrame{at, jpg}
	c.mu.Unlock()
	return jpg
}
