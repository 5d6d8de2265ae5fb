package entities

import (
	"context"
	"errors"
	"fmt"

	"github.com/ttlkit/ttlkit/ttl"
)

// invalid is an error whose message is exactly what the caller wrote and
// that matches ttl.ErrInvalid.
type invalid struct{ msg string }

func (e *invalid) Error() string { return e.msg }
func (e *invalid) Unwrap() error { return ttl.ErrInvalid }

// Invalid returns an error with the formatted message that matches
// ttl.ErrInvalid with errors.Is.
func Invalid(format string, args ...any) error {
	return &invalid{msg: fmt.Sprintf(format, args...)}
}

// Wrap prefixes a backend error with the package and operation. When ctx
// has ended, context.Cause(ctx) is wrapped too and reported first, so
// callers can tell their own cancellation from a backend failure. A nil
// err stays nil.
func Wrap(ctx context.Context, pkg, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(err, cause) && errors.Is(err, cerr):
		case cause != cerr && !errors.Is(err, cause):
			return fmt.Errorf("%s: %s: %w: %w: %w", pkg, op, cerr, cause, err)
		case !errors.Is(err, cerr):
			return fmt.Errorf("%s: %s: %w: %w", pkg, op, cerr, err)
		}
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}
