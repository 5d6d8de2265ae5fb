package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// Deps are what a Server is built on besides its Config: the store and
// how the load is measured. Tests supply their own.
type Deps struct {
	// Backend keeps leases and admission_metrics.
	Backend Backend
	// Sampler measures CPU, memory and swap. Nil means this machine
	// (sysload.NewSystem); where that is unsupported the server runs
	// without an overload gate and says so.
	Sampler sysload.Sampler
	// Logger receives the server's logs. Nil means discard.
	Logger *slog.Logger
}

// Server is one instance of the camera admission server.
type Server struct {
	cfg        Config
	log        *slog.Logger
	leases     *lease.Manager
	leaseStore lease.Store // the Manager's: the list of live leases is its to read
	seats      *Seats
	gate       *hysteresis.Gate
	monitor    *sysload.Monitor
	adm        *Admission
	api        API
	sessions   *Sessions
	streams    *Streams
	recorder   *Recorder
	history    History
	handler    http.Handler
}

// NewServer builds and starts an instance: the overload gate and its
// sampler, the lease Manager (and its cleanup loop), the metrics recorder.
// Close stops them.
func NewServer(cfg Config, deps Deps) (s *Server, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Backend.History == nil {
		deps.Backend.History = &memoryHistory{}
	}
	s = &Server{cfg: cfg, log: log, history: deps.Backend.History}
	defer func() {
		if err != nil {
			_ = s.Close(context.Background())
		}
	}()

	sampler := deps.Sampler
	if sampler == nil {
		sys, err := sysload.NewSystem(sysload.Options{})
		if err != nil {
			log.Warn("cameras: the load of this machine cannot be measured; running without the overload gate", "err", err)
		} else {
			sampler = sys
		}
	}
	if sampler != nil {
		s.gate, err = hysteresis.New(cfg.Signals(), hysteresis.Options{
			Hold: cmp.Or(cfg.OverloadHold, -1), // 0: reopen at the first calm sample
			// A sampler that stops shows as warning after three misses.
			StaleAfter: 3 * cfg.LoadInterval,
			Logger:     log,
		})
		if err != nil {
			return nil, err
		}
		s.monitor, err = sysload.NewMonitor(sampler, s.gate, sysload.MonitorOptions{Interval: cfg.LoadInterval, Logger: log})
		if err != nil {
			return nil, err
		}
	}

	s.leaseStore = deps.Backend.Leases
	if s.leaseStore == nil {
		s.leaseStore = lease.NewMemoryStore(nil)
	}
	opts := lease.Options{
		Store:         s.leaseStore,
		TTL:           cfg.ModalTTL,
		Grace:         cfg.HeartbeatGrace,
		SweepInterval: cfg.CleanupInterval,
		Logger:        log,
		OnEvent:       s.onLeaseEvent,
	}
	if s.gate != nil {
		opts.Gate = s.gate
	}
	if s.leases, err = lease.New(cfg.ModalBudget(), opts); err != nil {
		return nil, err
	}
	if cfg.Suggest {
		if s.seats, err = NewSeats(cfg, deps.Backend.Seats, s.onSeatEvent, log); err != nil {
			return nil, err
		}
	}
	s.sessions = NewSessions(cfg.SessionKey, cfg.SessionTTL, time.Now)
	s.adm = &Admission{cfg: cfg, leases: s.leases, seats: s.seats, gate: s.gate, monitor: s.monitor, sessions: s.sessions, log: log}
	h, err := leasehttp.New(s.leases, Holder, leasehttp.Options{Hosts: cfg.Hosts, Logger: log})
	if err != nil {
		return nil, err
	}
	s.api = API{Handler: h, leases: s.leases, adm: s.adm}
	s.streams = NewStreams(cfg, s.leases, s.api, log)
	s.streams.seats = s.seats
	s.adm.streams = s.streams
	s.recorder = NewRecorder(cfg, s.history, s.adm, log)
	s.handler = s.routes()
	return s, nil
}

// maxBody bounds API request bodies: a lease request is about 50 bytes.
const maxBody = 1 << 10

// ServeHTTP serves the whole HTTP surface (routes.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// onLeaseEvent ends the streams of leases that end, and logs.
func (s *Server) onLeaseEvent(ev lease.Event) {
	l := ev.Lease
	switch ev.Kind {
	case lease.EventReleased, lease.EventExpired:
		s.streams.End(l.ID)
	}
	switch ev.Kind {
	case lease.EventRejected:
		s.log.Info("cameras: modal rejected", "reason", ev.Rejection.Err, "camera", l.Resource)
	case lease.EventExpired:
		by := "ttl"
		if l.HeartbeatAt.Add(l.Grace).Before(l.ExpiresAt) { // missed heartbeats
			by = "heartbeat"
		}
		s.log.Info("cameras: modal expired", "lease", l.ID, "camera", l.Resource, "by", by)
	case lease.EventGranted, lease.EventReleased:
		s.log.Info("cameras: modal "+ev.Kind.String(), "lease", l.ID, "camera", l.Resource, "quality", qualityOf(s.cfg, l.Cost))
	}
}

// onSeatEvent ends the suggest streams of seats that end, and logs.
func (s *Server) onSeatEvent(ev lease.Event) {
	switch ev.Kind {
	case lease.EventReleased, lease.EventExpired:
		s.streams.EndSuggest(ev.Lease.ID)
		s.log.Debug("cameras: UI user seat "+ev.Kind.String(), "seat", ev.Lease.ID)
	case lease.EventGranted:
		s.log.Debug("cameras: UI user seated", "seat", ev.Lease.ID)
	}
}

// StopStreams ends every stream: the first step of a graceful shutdown, as
// streams never go idle by themselves.
func (s *Server) StopStreams() {
	if s.streams != nil {
		s.streams.StopAll()
	}
}

// Close stops the instance's loops (metrics, load sampling, lease cleanup)
// and waits for them until ctx ends. Leases stay in the store: they belong
// to their pages and end by release or expiry.
func (s *Server) Close(ctx context.Context) error {
	s.StopStreams()
	if s.recorder != nil {
		s.recorder.Close()
	}
	var errs []error
	if s.monitor != nil {
		errs = append(errs, s.monitor.Close(ctx))
	}
	if s.gate != nil {
		// The gate logs its transitions from a goroutine of its own.
		errs = append(errs, s.gate.Close(ctx))
	}
	if s.leases != nil {
		if err := s.leases.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing leases: %w", err))
		}
	}
	if err := s.seats.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("closing UI user seats: %w", err))
	}
	return errors.Join(errs...)
}
