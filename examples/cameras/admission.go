package main

import (
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// Admission is the admission control of the design: the budget model,
// modal leases through the lease package, the overload gate, and the
// shapes of the API's bodies.
type Admission struct {
	cfg      Config
	leases   *lease.Manager
	gate     *hysteresis.Gate // nil when the load cannot be measured
	monitor  *sysload.Monitor // nil likewise
	seats    *Seats           // nil when suggest streams are off
	sessions *Sessions
	streams  *Streams
	log      *slog.Logger
}

// leaseRequest is the body of POST /api/modal/lease (§8.1).
type leaseRequest struct {
	CameraID string  `json:"camera_id"`
	Quality  Quality `json:"quality"`
}

// leaseResponse is the answer to a granted POST /api/modal/lease (§8.1).
type leaseResponse struct {
	LeaseID        string    `json:"lease_id"`
	AllowedQuality Quality   `json:"allowed_quality"`
	ExpiresAt      time.Time `json:"expires_at"`
	StreamURL      string    `json:"stream_url"`
}

// heartbeatResponse is the answer to a heartbeat (§8.2).
type heartbeatResponse struct {
	OK           bool `json:"ok"`
	RemainingSec int  `json:"remaining_sec"`
}

// statusResponse is the answer to GET /api/system/status (§8.4); the
// fields after SuggestActive are this server's additions for the page's
// status panel.
type statusResponse struct {
	Healthy              bool    `json:"healthy"`
	CPUPercent           float64 `json:"cpu_percent"`
	MemoryPercent        float64 `json:"memory_percent"`
	ActiveModals         int     `json:"active_modals"`
	ModalBudgetRemaining int     `json:"modal_budget_remaining"`
	SuggestActive        bool    `json:"suggest_active"`

	State            string  `json:"state"` // the gate: normal, warning, overloaded or unmeasured
	SwapMB           float64 `json:"swap_mb"`
	ModalBudget      int     `json:"modal_budget"`
	ModalUnitsInUse  int     `json:"modal_units_in_use"`
	ActiveUIUsers    int     `json:"active_ui_users"`
	CurrentUsage     int     `json:"current_usage"` // baseline + suggest + modal units (§2.3)
	TotalStreamUnits int     `json:"total_stream_units"`

	// With suggest streams on: MaxUIUsers is how many UI users can have one
	// at once; UISeat is the caller's seat, the lease_id its suggest stream
	// and the page's next polls name, or UISeatRefused says why it has none.
	MaxUIUsers    int                `json:"max_ui_users,omitempty"`
	UISeat        string             `json:"ui_seat,omitempty"`
	UISeatRefused *leasehttp.Problem `json:"ui_seat_refused,omitempty"`
}

// Decode turns a lease request into a lease.Request: the camera is the
// resource, sub costs SUB_STREAM_COST, main costs MAIN_STREAM_COST and
// falls back to sub when only that fits (§2, the reply's allowed_quality
// says which it got).
func (a *Admission) Decode(r *http.Request, body []byte) (lease.Request, error) {
	var req leaseRequest
	if err := decodeBody(body, &req); err != nil {
		return lease.Request{}, err
	}
	if !a.streams.Camera(req.CameraID) {
		return lease.Request{}, unknownCamera(r, req.CameraID)
	}
	switch req.Quality {
	case Sub:
		return lease.Request{Resource: req.CameraID, Cost: a.cfg.SubStreamCost}, nil
	case Main:
		return lease.Request{Resource: req.CameraID, Cost: a.cfg.MainStreamCost, Fallback: []int{a.cfg.SubStreamCost}}, nil
	}
	return lease.Request{}, problem(r, http.StatusBadRequest, "INVALID_QUALITY", req.Quality)
}

// problem returns the refusal code, in r's language.
func problem(r *http.Request, status int, code string, args ...any) *leasehttp.Problem {
	return &leasehttp.Problem{Status: status, Code: code, Message: message(langOf(r), code, args...)}
}

func unknownCamera(r *http.Request, id string) error {
	return problem(r, http.StatusNotFound, "UNKNOWN_CAMERA", id)
}

// Granted ends the streams of the session's earlier leases (a session
// watches one modal at a time) and returns the answer to the grant of l.
func (a *Admission) Granted(l lease.Lease) leaseResponse {
	a.streams.Supersede(l.Holder, l.ID)
	return leaseResponse{
		LeaseID:        l.ID,
		AllowedQuality: qualityOf(a.cfg, l.Cost),
		ExpiresAt:      l.ExpiresAt.UTC(),
		StreamURL:      "/stream/" + url.PathEscape(l.Resource) + "?lease_id=" + url.QueryEscape(l.ID),
	}
}

// Heartbeated answers a heartbeat with the time left until the modal's
// TTL: hb's own when the TTL ends within the grace (exact, by the store's
// clock), else measured on this server's clock at now.
func (a *Admission) Heartbeated(hb lease.HeartbeatResult, now time.Time) heartbeatResponse {
	remaining := hb.Remaining
	if remaining >= hb.Lease.Grace {
		remaining = max(remaining, hb.Lease.ExpiresAt.Sub(now))
	}
	return heartbeatResponse{OK: true, RemainingSec: seconds(remaining)}
}

// Status answers GET /api/system/status, and counts the page that asked as
// an active UI user: it heartbeats the page's seat (?seat=, the ui_seat of
// its previous poll), or seats it when a seat is free.
func (a *Admission) Status(r *http.Request, units, leases int) statusResponse {
	a.sessions.Touch(r)
	budget := a.cfg.ModalBudget()
	s := statusResponse{
		Healthy:              true,
		ActiveModals:         leases,
		ModalBudgetRemaining: max(budget-units, 0),
		ModalBudget:          budget,
		ModalUnitsInUse:      units,
		TotalStreamUnits:     a.cfg.TotalStreamUnits,
		State:                "unmeasured",
	}
	if a.gate != nil {
		s.Healthy = !a.gate.Overloaded()
		s.State = a.gate.State().String()
	}
	if a.monitor != nil {
		last := a.monitor.Stats().Last
		s.CPUPercent, s.MemoryPercent = round1(last.CPU), round1(last.Memory)
		s.SwapMB = round1(float64(last.Swap) / mib)
	}
	s.ActiveUIUsers = a.sessions.Active()
	if a.seats != nil {
		s.MaxUIUsers = a.seats.Max()
		s.UISeat, s.UISeatRefused = a.seat(r)
		users, err := a.seats.Users(r.Context())
		if err != nil {
			a.log.Warn("cameras: counting UI users", "err", err)
		}
		s.ActiveUIUsers = users
	}
	s.SuggestActive = a.suggestActive(s.ActiveUIUsers)
	s.CurrentUsage = a.currentUsage(s.ActiveUIUsers, units)
	return s
}

// seat seats the request's session, or keeps its seat, and returns the
// seat's id; else why it has none.
func (a *Admission) seat(r *http.Request) (string, *leasehttp.Problem) {
	holder, err := Holder(r)
	if err != nil {
		return "", problem(r, http.StatusUnauthorized, "NO_SESSION")
	}
	l, err := a.seats.Take(r.Context(), holder, r.URL.Query().Get("seat"))
	switch {
	case err == nil:
		return l.ID, nil
	case errors.Is(err, errSeatsFull):
		return "", a.seatsFull(r)
	}
	a.log.Warn("cameras: seating a UI user", "err", err)
	return "", problem(r, http.StatusInternalServerError, "INTERNAL")
}

// seatsFull is the refusal of a UI user beyond MAX_UI_USERS.
func (a *Admission) seatsFull(r *http.Request) *leasehttp.Problem {
	return problem(r, http.StatusTooManyRequests, CodeUIUsersFull, a.seats.Max())
}

// suggestActive is the design's suggest_active: suggest streams are on and
// some page is open.
func (a *Admission) suggestActive(users int) bool { return a.cfg.Suggest && users > 0 }

// currentUsage is §2.3: baseline + suggest usage + modal usage, in units.
func (a *Admission) currentUsage(users, modalUnits int) int {
	suggest := 0
	if a.suggestActive(users) {
		suggest = users * a.cfg.SubStreamCost
	}
	return a.cfg.ReservedBaselineUnits + suggest + modalUnits
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
