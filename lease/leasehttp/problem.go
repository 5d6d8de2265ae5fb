package leasehttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ttlkit/ttlkit/lease"
)

// The error codes of a Problem (see the package doc).
const (
	codeOverloaded           = "overloaded"
	codeHolderHasLease       = "holder_has_lease"
	codeOverCapacity         = "over_capacity"
	codeRecovering           = "recovering"
	codeBadJSON              = "bad_json"
	codeInvalidArgument      = "invalid_argument"
	codeBodyTooLarge         = "body_too_large"
	codeUnsupportedMediaType = "unsupported_media_type"
	codeNoHolder             = "no_holder"
	codeNotHolder            = "not_holder"
	codeNotFound             = "not_found"
	codeCrossSite            = "cross_site"
	codeUnknownHost          = "unknown_host"
	codeExpired              = "expired"
	codeUnavailable          = "unavailable"
	codeInternal             = "internal"
)

// Problem is the JSON body of every error response, and its status.
type Problem struct {
	// Status is the HTTP status code.
	Status int `json:"-"`
	// Code is the stable error code (see the package doc).
	Code string `json:"error_code"`
	// Message says what went wrong, for a person.
	Message string `json:"message"`
	// Err is the error the problem was made from: a *lease.RejectedError,
	// lease.ErrNotFound, ... It is not sent.
	Err error `json:"-"`
}

// Error implements error, so that a server can pass Handler.Error a Problem
// of its own (an unknown resource, a bad field) with the code and status
// it wants.
func (p *Problem) Error() string { return p.Code + ": " + p.Message }

// Unwrap returns Err.
func (p *Problem) Unwrap() error { return p.Err }

// ProblemFor returns the Problem that answers err: a copy of err's own
// *Problem if it has one (errors.As), else the one the package doc's table
// gives for the error, with Err set to err. A server that speaks other
// codes or another language rewrites the Problem it gets and passes it to
// Handler.Error.
func ProblemFor(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		c := *p
		return &c
	}
	var re *lease.RejectedError
	if errors.As(err, &re) {
		switch {
		case errors.Is(err, lease.ErrOverloaded):
			return &Problem{http.StatusServiceUnavailable, codeOverloaded, "the server is overloaded; try again later", err}
		case errors.Is(err, lease.ErrHolderHasLease):
			return &Problem{http.StatusConflict, codeHolderHasLease, "you already hold a lease; release it first", err}
		case errors.Is(err, lease.ErrRecovering):
			return &Problem{http.StatusServiceUnavailable, codeRecovering, "the lease store is recovering from a restart; try again later", err}
		default:
			return &Problem{http.StatusTooManyRequests, codeOverCapacity, "no capacity is left; try again later", err}
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &Problem{http.StatusRequestEntityTooLarge, codeBodyTooLarge, "the request body is too large", err}
	case errors.Is(err, lease.ErrWrongHolder):
		return &Problem{http.StatusForbidden, codeNotHolder, "the lease belongs to someone else", err}
	case errors.Is(err, lease.ErrReleased):
		return &Problem{http.StatusNotFound, codeNotFound, "the lease was released", err}
	case errors.Is(err, lease.ErrNotFound):
		return &Problem{http.StatusNotFound, codeNotFound, "no such lease", err}
	case errors.Is(err, lease.ErrExpired):
		return &Problem{http.StatusGone, codeExpired, "the lease has expired", err}
	case errors.Is(err, lease.ErrInvalid):
		return &Problem{http.StatusBadRequest, codeInvalidArgument, err.Error(), err}
	case errors.Is(err, lease.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Problem{http.StatusServiceUnavailable, codeUnavailable, "the server is not available; try again later", err}
	}
	return &Problem{http.StatusInternalServerError, codeInternal, "internal error", err}
}

// writeJSON writes v with status, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
