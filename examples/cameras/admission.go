package main

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// The design's rejection codes and messages (§6.2, §8.1), and the codes of
// the other refusals.
const (
	CodeSystemOverload      = "SYSTEM_OVERLOAD"
	CodeUserAlreadyHasModal = "USER_ALREADY_HAS_MODAL"
	CodeOverCapacity        = "OVER_CAPACITY"
	CodeCrossOrigin         = "CROSS_ORIGIN"
	CodeUnknownHost         = "UNKNOWN_HOST"

	MsgSystemOverload      = "サーバーが高負荷のためしばらく経ってからお試しください"
	MsgUserAlreadyHasModal = "既に別のカメラを表示中です"
	MsgOverCapacity        = "現在多数のアクセスがありストリーム数が上限に達しています。しばらく経ってからアクセスしてください"
	MsgCrossOrigin         = "他のサイトからのリクエストは受け付けません"
	MsgUnknownHost         = "このホスト名では受け付けません（ALLOWED_HOSTS を確認してください）"
)

// codes maps leasehttp's codes to this API's, with the message a user sees.
var codes = map[string]struct{ code, msg string }{
	leasehttp.CodeOverloaded:           {CodeSystemOverload, MsgSystemOverload},
	leasehttp.CodeHolderHasLease:       {CodeUserAlreadyHasModal, MsgUserAlreadyHasModal},
	leasehttp.CodeOverCapacity:         {CodeOverCapacity, MsgOverCapacity},
	leasehttp.CodeBadJSON:              {"BAD_JSON", "リクエストのJSONが不正です"},
	leasehttp.CodeInvalidArgument:      {"INVALID_ARGUMENT", "リクエストの値が不正です"},
	leasehttp.CodeBodyTooLarge:         {"BODY_TOO_LARGE", "リクエストが大きすぎます"},
	leasehttp.CodeUnsupportedMediaType: {"UNSUPPORTED_MEDIA_TYPE", "Content-Type は application/json にしてください"},
	leasehttp.CodeNoHolder:             {"NO_SESSION", "セッションがありません"},
	leasehttp.CodeNotHolder:            {"NOT_YOUR_LEASE", "このLeaseは別のセッションのものです"},
	leasehttp.CodeNotFound:             {"LEASE_NOT_FOUND", "Leaseが見つかりません（解放済みか期限切れです）"},
	leasehttp.CodeExpired:              {"LEASE_EXPIRED", "Leaseの期限が切れています"},
	leasehttp.CodeUnavailable:          {"UNAVAILABLE", "サーバーが停止中です。しばらく経ってからお試しください"},
	leasehttp.CodeInternal:             {"INTERNAL", "サーバー内部のエラーです"},
	leasehttp.CodeCrossSite:            {CodeCrossOrigin, MsgCrossOrigin},
	leasehttp.CodeUnknownHost:          {CodeUnknownHost, MsgUnknownHost},
}

// Admission is the admission control of the design: the budget model,
// modal leases through the lease package, the overload gate, and the
// shapes of the API's bodies.
type Admission struct {
	cfg      Config
	leases   *lease.Manager
	gate     *hysteresis.Gate // nil when the load cannot be measured
	monitor  *sysload.Monitor // nil likewise
	sessions *Sessions
	streams  *Streams
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
}

// Decode turns a lease request into a lease.Request: the camera is the
// resource, sub costs SUB_STREAM_COST, main costs MAIN_STREAM_COST and
// falls back to sub when only that fits (§2, the reply's allowed_quality
// says which it got).
func (a *Admission) Decode(_ *http.Request, body []byte) (lease.Request, error) {
	var req leaseRequest
	if err := leasehttp.DecodeJSON(body, &req); err != nil {
		return lease.Request{}, err
	}
	if !a.streams.Camera(req.CameraID) {
		return lease.Request{}, unknownCamera(req.CameraID)
	}
	switch req.Quality {
	case Sub:
		return lease.Request{Resource: req.CameraID, Cost: a.cfg.SubStreamCost}, nil
	case Main:
		return lease.Request{Resource: req.CameraID, Cost: a.cfg.MainStreamCost, Fallback: []int{a.cfg.SubStreamCost}}, nil
	}
	return lease.Request{}, &leasehttp.Problem{Status: http.StatusBadRequest, Code: "INVALID_QUALITY",
		Message: fmt.Sprintf("quality %q は sub か main にしてください", req.Quality)}
}

func unknownCamera(id string) error {
	return &leasehttp.Problem{Status: http.StatusNotFound, Code: "UNKNOWN_CAMERA", Message: fmt.Sprintf("カメラ %q はありません", id)}
}

// Granted answers a grant, and ends the streams of the session's earlier
// leases: a session watches one modal at a time.
func (a *Admission) Granted(_ *http.Request, l lease.Lease) any {
	a.streams.Supersede(l.Holder, l.ID)
	return leaseResponse{
		LeaseID:        l.ID,
		AllowedQuality: qualityOf(a.cfg, l.Cost),
		ExpiresAt:      l.ExpiresAt.UTC(),
		StreamURL:      "/stream/" + url.PathEscape(l.Resource) + "?lease_id=" + url.QueryEscape(l.ID),
	}
}

// Heartbeated answers a heartbeat with the time left until the modal's TTL.
func (a *Admission) Heartbeated(_ *http.Request, hb leasehttp.Heartbeat) any {
	return heartbeatResponse{OK: true, RemainingSec: leasehttp.Seconds(hb.Remaining)}
}

// Problem gives every refusal this API's code and message.
func (a *Admission) Problem(_ *http.Request, p *leasehttp.Problem) {
	if c, ok := codes[p.Code]; ok {
		p.Code, p.Message = c.code, c.msg
	}
}

// Status answers GET /api/system/status, and counts the page that asked as
// an active UI user.
func (a *Admission) Status(r *http.Request, u lease.Usage) any {
	a.sessions.Touch(r)
	s := statusResponse{
		Healthy:              true,
		ActiveModals:         u.Leases,
		ModalBudgetRemaining: u.Available,
		ModalBudget:          u.Budget,
		ModalUnitsInUse:      u.Units,
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
		s.SwapMB = round1(float64(last.Swap) / sysload.MiB)
	}
	s.ActiveUIUsers = a.sessions.Active()
	s.SuggestActive = a.suggestActive(s.ActiveUIUsers)
	s.CurrentUsage = a.currentUsage(s.ActiveUIUsers, u.Units)
	return s
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
