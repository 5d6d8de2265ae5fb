package pool

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrClosed is returned by Acquire and TryAcquire once Close has begun.
	ErrClosed = errors.New("pool: closed")
	// ErrUnavailable is returned by TryAcquire when no idle item is ready.
	ErrUnavailable = errors.New("pool: no idle item available")
	// ErrCreate is matched by Acquire's error when a create failed, panicked or timed out.
	ErrCreate = errors.New("pool: create")
	// ErrCreateTimeout is matched (and context.DeadlineExceeded is not) by a Create past CreateTimeout.
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

// ErrInvalid is matched by every error about a bad Options field or argument, which
// the message names.
var ErrInvalid = errors.New("pool: invalid argument")
