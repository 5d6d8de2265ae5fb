package expiry

import (
	"errors"

	"github.com/ttlkit/ttlkit/internal/errs"
)

var (
	// ErrInvalid matches every error about a bad option or argument; the
	// error's message names the field or argument and its value. Nothing is
	// changed.
	ErrInvalid = errors.New("expiry: invalid argument")
	// ErrInvalidTTL is returned, with the offending value, for a TTL that is
	// not positive or whose deadline would overflow. It matches ErrInvalid
	// too. The key is left unchanged.
	ErrInvalidTTL = errs.Invalid(ErrInvalid, "expiry: invalid ttl")
	// ErrClosed is returned by Expirer.Start after Close.
	ErrClosed = errors.New("expiry: closed")
)
