package leasehttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// GrantRequest is the default JSON body of a grant.
type GrantRequest struct {
	// Resource is what the lease is for.
	Resource string `json:"resource"`
	// Cost is the preferred cost in budget units.
	Cost int `json:"cost"`
	// Fallback lists cheaper costs to take, in order, when Cost does not fit.
	Fallback []int `json:"fallback,omitempty"`
}

// DecodeRequest is the default Options.Decode: body is a GrantRequest, with
// no unknown fields and nothing after it.
func DecodeRequest(_ *http.Request, body []byte) (lease.Request, error) {
	var g GrantRequest
	if err := DecodeJSON(body, &g); err != nil {
		return lease.Request{}, err
	}
	return lease.Request{Resource: g.Resource, Cost: g.Cost, Fallback: g.Fallback}, nil
}

// DecodeJSON decodes body, one JSON object with no unknown fields and
// nothing after it, into v. Its error is a *Problem with code bad_json.
func DecodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		return &Problem{Status: http.StatusBadRequest, Code: CodeBadJSON, Message: "malformed JSON: " + err.Error(), Err: err}
	}
	return nil
}

// GrantBody is the default JSON answer to a grant.
type GrantBody struct {
	LeaseID   string    `json:"lease_id"`
	Resource  string    `json:"resource"`
	Cost      int       `json:"cost"`
	Token     uint64    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	// TTLSec is ExpiresAt − CreatedAt and GraceSec the heartbeat grace,
	// in seconds.
	TTLSec   float64 `json:"ttl_sec"`
	GraceSec float64 `json:"grace_sec"`
}

// GrantResponse is the default Options.Granted.
func GrantResponse(_ *http.Request, l lease.Lease) any {
	return GrantBody{
		LeaseID: l.ID, Resource: l.Resource, Cost: l.Cost, Token: l.Token,
		ExpiresAt: l.ExpiresAt.UTC(),
		TTLSec:    l.ExpiresAt.Sub(l.CreatedAt).Seconds(),
		GraceSec:  l.Grace.Seconds(),
	}
}

// Heartbeat describes a successful heartbeat to Options.Heartbeated.
type Heartbeat struct {
	// Lease is the lease as read just before the heartbeat.
	Lease lease.Lease
	// Live is how long the lease stays live without another heartbeat:
	// min(Grace, time left to ExpiresAt), by the store's clock.
	Live time.Duration
	// Remaining is the time left until ExpiresAt, the absolute end: Live
	// when the TTL ends within the grace (exact, by the store's clock),
	// else measured on Options.Clock (and never below Live).
	Remaining time.Duration
}

// HeartbeatBody is the default JSON answer to a heartbeat.
type HeartbeatBody struct {
	OK bool `json:"ok"`
	// RemainingSec is Heartbeat.Remaining in whole seconds, rounded down.
	RemainingSec int `json:"remaining_sec"`
	// LiveSec is Heartbeat.Live in seconds.
	LiveSec float64 `json:"live_sec"`
}

// HeartbeatResponse is the default Options.Heartbeated.
func HeartbeatResponse(_ *http.Request, hb Heartbeat) any {
	return HeartbeatBody{OK: true, RemainingSec: Seconds(hb.Remaining), LiveSec: hb.Live.Seconds()}
}

// Seconds returns d in whole seconds, rounded down, never negative: a
// client that counts down from it never outlives the server's view.
func Seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Floor(d.Seconds()))
}

// StatusBody is the default JSON answer to a status request.
type StatusBody struct {
	Budget    int `json:"budget"`
	Units     int `json:"units"`
	Leases    int `json:"leases"`
	Available int `json:"available"`
}

// StatusResponse is the default Options.Status.
func StatusResponse(_ *http.Request, u lease.Usage) any {
	return StatusBody{Budget: u.Budget, Units: u.Units, Leases: u.Leases, Available: u.Available}
}

// okBody is the answer to a release.
type okBody struct {
	OK bool `json:"ok"`
}
