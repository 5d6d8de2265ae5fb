package pool

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors returned by Pool methods.
var (
	// ErrClosed is returned by Acquire and TryAcquire once Close has begun.
	ErrClosed = errors.New("pool: closed")
	// ErrUnavailable is returned by TryAcquire when no idle item is ready.
	ErrUnavailable = errors.New("pool: no idle item available")
	// ErrCreate wraps every error a create produced (Provisioner.Create
	// failing, panicking or running past CreateTimeout) as seen by Acquire.
	ErrCreate = errors.New("pool: create")
	// ErrCreateTimeout is wrapped by the error of a Create call that ran
	// past Options.CreateTimeout. It does not match
	// context.DeadlineExceeded: the caller's own deadline did not pass.
	ErrCreateTimeout = errors.New("pool: create ran past CreateTimeout")
)

// createError is a create's error as Acquire returns it: it matches
// ErrCreate and the cause.
type createError struct{ err error }

func (e *createError) Error() string {
	return "pool: create: " + strings.TrimPrefix(e.err.Error(), "pool: ")
}

func (e *createError) Unwrap() []error { return []error{ErrCreate, e.err} }

// createTimeoutError is a Create call that ran past CreateTimeout.
type createTimeoutError struct{ d time.Duration }

func (e *createTimeoutError) Error() string {
	return fmt.Sprintf("ran past CreateTimeout (%v)", e.d)
}

func (e *createTimeoutError) Is(target error) bool { return target == ErrCreateTimeout }

// PanicError is a panic recovered from a Provisioner call.
type PanicError struct {
	Op    string // "create", "destroy" or "check"
	Value any    // the value passed to panic
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("pool: %s panicked: %v", e.Op, e.Value) }

// ErrInvalid is matched by every error about bad Options or arguments; the
// message names the field or argument as the caller set it.
var ErrInvalid = errors.New("pool: invalid argument")
