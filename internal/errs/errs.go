// Package errs holds the error helpers every ttlkit package shares: invalid
// options and arguments, and backend errors wrapped with the operation and
// the caller's cancellation.
package errs

import (
	"context"
	"errors"
	"fmt"
)

// invalid is an error whose message is exactly what the caller wrote (it
// names the field or argument and its value) and that matches the package's
// ErrInvalid sentinel.
type invalid struct {
	msg      string
	sentinel error
}

func (e *invalid) Error() string { return e.msg }
func (e *invalid) Unwrap() error { return e.sentinel }

// Invalid returns an error with the formatted message that matches sentinel
// with errors.Is. The message should start with the package name and name
// the field or argument the user set: "pool: MinIdle (5) > MaxSize (2)".
// An argument of format that is an error is not wrapped; use %v for it.
func Invalid(sentinel error, format string, args ...any) error {
	return &invalid{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}

// Wrap prefixes a backend error with the package and operation:
// "redisttl: peek: <err>". When ctx has ended, context.Cause(ctx) is wrapped
// too and reported first, so callers can tell their own cancellation from a
// backend failure with errors.Is. A nil err stays nil.
func Wrap(ctx context.Context, pkg, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(err, cause) && errors.Is(err, cerr):
		case cause != cerr && !errors.Is(err, cause):
			// A custom cause: report it, and still match context.Canceled
			// or DeadlineExceeded as a plain cancellation would.
			return fmt.Errorf("%s: %s: %w: %w: %w", pkg, op, cerr, cause, err)
		case !errors.Is(err, cerr):
			return fmt.Errorf("%s: %s: %w: %w", pkg, op, cerr, err)
		}
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}

// Canceled returns a wrapped context.Cause(ctx) if ctx has ended, else nil:
// a call checks it first so that a dead context sends nothing. The error
// matches ctx.Err() too when the cause is a custom one.
func Canceled(ctx context.Context, pkg, op string) error {
	cerr := ctx.Err()
	if cerr == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != cerr {
		return fmt.Errorf("%s: %s: %w: %w", pkg, op, cerr, cause)
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, cerr)
}

// Mark returns err marked with class: the result matches class and
// everything err matches, and has err's message. A nil err, and one that
// already matches any of classes, is returned as it is (a store marks its
// failures ErrNotApplied or ErrUnknownOutcome once, at the deepest call
// that knows which).
func Mark(err, class error, classes ...error) error {
	if err == nil {
		return nil
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return err
		}
	}
	return &marked{err: err, class: class}
}

// marked is an error with its class.
type marked struct{ err, class error }

func (e *marked) Error() string   { return e.err.Error() }
func (e *marked) Unwrap() []error { return []error{e.err, e.class} }
