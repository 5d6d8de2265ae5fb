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

// grantRequest is the JSON body of a grant.
type grantRequest struct {
	// Resource is what the lease is for.
	Resource string `json:"resource"`
	// Cost is the preferred cost in budget units.
	Cost int `json:"cost"`
	// Fallback lists cheaper costs to take, in order, when Cost does not fit.
	Fallback []int `json:"fallback,omitempty"`
}

// decodeRequest decodes body, a grantRequest with no unknown fields and
// nothing after it.
func decodeRequest(body []byte) (lease.Request, error) {
	var g grantRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&g)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		return lease.Request{}, &Problem{Status: http.StatusBadRequest, Code: codeBadJSON, Message: "malformed JSON: " + err.Error(), Err: err}
	}
	return lease.Request{Resource: g.Resource, Cost: g.Cost, Fallback: g.Fallback}, nil
}

// grantBody is the JSON answer to a grant.
type grantBody struct {
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

func grantResponse(l lease.Lease) grantBody {
	return grantBody{
		LeaseID: l.ID, Resource: l.Resource, Cost: l.Cost, Token: l.Token,
		ExpiresAt: l.ExpiresAt.UTC(),
		TTLSec:    l.ExpiresAt.Sub(l.CreatedAt).Seconds(),
		GraceSec:  l.Grace.Seconds(),
	}
}

// heartbeatBody is the JSON answer to a heartbeat.
type heartbeatBody struct {
	OK bool `json:"ok"`
	// RemainingSec is the time left until ExpiresAt, the absolute end, in
	// whole seconds rounded down (see seconds).
	RemainingSec int `json:"remaining_sec"`
	// LiveSec is how long the lease stays live without another heartbeat,
	// in seconds: min(Grace, time left to ExpiresAt), by the store's clock.
	LiveSec float64 `json:"live_sec"`
}

// seconds returns d in whole seconds, rounded down, never negative: a
// client that counts down from it never outlives the server's view.
func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Floor(d.Seconds()))
}

// statusBody is the JSON answer to a status request.
type statusBody struct {
	Budget    int `json:"budget"`
	Units     int `json:"units"`
	Leases    int `json:"leases"`
	Available int `json:"available"`
}

// okBody is the answer to a release.
type okBody struct {
	OK bool `json:"ok"`
}
