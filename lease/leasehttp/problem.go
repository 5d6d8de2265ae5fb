package leasehttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ttlkit/ttlkit/lease"
)

// The error codes of a Problem. They are stable: clients may switch on them.
const (
	CodeOverloaded           = string(lease.ReasonOverloaded)
	CodeHolderHasLease       = string(lease.ReasonHolderHasLease)
	CodeOverCapacity         = string(lease.ReasonOverCapacity)
	CodeRecovering           = string(lease.ReasonRecovering)
	CodeBadJSON              = "bad_json"
	CodeInvalidArgument      = "invalid_argument"
	CodeBodyTooLarge         = "body_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeNoHolder             = "no_holder"
	CodeNotHolder            = "not_holder"
	CodeNotFound             = "not_found"
	CodeCrossSite            = "cross_site"
	CodeUnknownHost          = "unknown_host"
	CodeExpired              = "expired"
	CodeUnavailable          = "unavailable"
	CodeInternal             = "internal"
)

// ErrNotHolder is returned by Handler.Held, and matched by Problem.Err, when
// the lease belongs to another holder than the request's.
// It is lease.ErrWrongHolder, which the holder-checked store calls return.
var ErrNotHolder = lease.ErrWrongHolder

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

// Error implements error, so that Options.Decode can return a Problem of its
// own (an unknown camera, a bad quality) with the code and status it wants.
func (p *Problem) Error() string { return p.Code + ": " + p.Message }

// Unwrap returns Err.
func (p *Problem) Unwrap() error { return p.Err }

// problemFor maps err to its Problem.
func problemFor(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var re *lease.RejectedError
	if errors.As(err, &re) {
		switch re.Reason {
		case lease.ReasonOverloaded:
			return &Problem{http.StatusServiceUnavailable, CodeOverloaded, "the server is overloaded; try again later", err}
		case lease.ReasonHolderHasLease:
			return &Problem{http.StatusConflict, CodeHolderHasLease, "you already hold a lease; release it first", err}
		case lease.ReasonRecovering:
			return &Problem{http.StatusServiceUnavailable, CodeRecovering, "the lease store is recovering from a restart; try again later", err}
		default:
			return &Problem{http.StatusTooManyRequests, CodeOverCapacity, "no capacity is left; try again later", err}
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &Problem{http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the request body is too large", err}
	case errors.Is(err, ErrNotHolder):
		return &Problem{http.StatusForbidden, CodeNotHolder, "the lease belongs to someone else", err}
	case errors.Is(err, lease.ErrReleased):
		return &Problem{http.StatusNotFound, CodeNotFound, "the lease was released", err}
	case errors.Is(err, lease.ErrNotFound):
		return &Problem{http.StatusNotFound, CodeNotFound, "no such lease", err}
	case errors.Is(err, lease.ErrExpired):
		return &Problem{http.StatusGone, CodeExpired, "the lease has expired", err}
	case errors.Is(err, lease.ErrInvalid):
		return &Problem{http.StatusBadRequest, CodeInvalidArgument, err.Error(), err}
	case errors.Is(err, lease.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Problem{http.StatusServiceUnavailable, CodeUnavailable, "the server is not available; try again later", err}
	}
	return &Problem{http.StatusInternalServerError, CodeInternal, "internal error", err}
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
