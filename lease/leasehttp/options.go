package leasehttp

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
)

// DefaultMaxBody is the largest request body accepted when Options.MaxBody
// is 0: a grant request is a few dozen bytes.
const DefaultMaxBody = 4 << 10

// ErrInvalid is matched by the error of New for a bad option or argument;
// the error names it.
var ErrInvalid = errors.New("leasehttp: invalid argument")

// HolderFunc returns the holder a request speaks for: a session id from a
// signed cookie, a user from an authenticated header. An error (or "") is
// answered with 401 no_holder and the request changes nothing.
type HolderFunc func(r *http.Request) (string, error)

// Options shape a Handler. The zero value speaks the default JSON bodies.
type Options struct {
	// Decode turns a grant's JSON body into a lease.Request; the handler
	// sets its Holder. A *Problem error is answered as it is; any other
	// error with 400 invalid_argument and its message. Nil means
	// DecodeRequest.
	Decode func(r *http.Request, body []byte) (lease.Request, error)
	// Granted returns the JSON body of a 201 answer to a grant. Nil means
	// GrantResponse.
	Granted func(r *http.Request, l lease.Lease) any
	// Heartbeated returns the JSON body of a 200 answer to a heartbeat:
	// the lease as it was before the heartbeat, the heartbeat deadline it
	// has now and its time left until ExpiresAt (see HeartbeatResponse).
	// Nil means HeartbeatResponse.
	Heartbeated func(r *http.Request, hb Heartbeat) any
	// Status returns the JSON body of a 200 answer to a status request.
	// Nil means StatusResponse.
	Status func(r *http.Request, u lease.Usage) any
	// Problem, if set, may rewrite every error answer before it is sent
	// (its code, message or status).
	Problem func(r *http.Request, p *Problem)
	// LeaseID returns the lease id named by a heartbeat or release
	// request. Nil means r.PathValue("id"), the wildcard of the patterns
	// the Handler itself routes.
	LeaseID func(r *http.Request) string
	// Hosts are the host names the server is reached by, besides loopback
	// names (localhost, *.localhost) and IP addresses, which always pass:
	// "example.com" is that name, ".example.com" it and every name under
	// it, "*" any name (for a server behind a proxy that checks Host
	// itself). A request for another Host gets 403 unknown_host: a page
	// served under a name its owner then points at 127.0.0.1 (DNS
	// rebinding) would otherwise use the leases as if it were the
	// server's own page. Nil answers loopback names and addresses only.
	Hosts []string
	// MaxBody is the largest request body accepted, in bytes; a longer one
	// is answered with 413 body_too_large. 0 means DefaultMaxBody;
	// negative is an error.
	MaxBody int64
	// Clock is the time source for the time left in a heartbeat answer.
	// Nil means real time.
	Clock func() time.Time
	// Logger receives internal errors (error) and refusals (debug). Nil
	// means discard.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxBody < 0 {
		return o, errs.Invalid(ErrInvalid, "leasehttp: MaxBody (%d) is negative", o.MaxBody)
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Decode == nil {
		o.Decode = DecodeRequest
	}
	if o.Granted == nil {
		o.Granted = GrantResponse
	}
	if o.Heartbeated == nil {
		o.Heartbeated = HeartbeatResponse
	}
	if o.Status == nil {
		o.Status = StatusResponse
	}
	if o.LeaseID == nil {
		o.LeaseID = func(r *http.Request) string { return r.PathValue("id") }
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
