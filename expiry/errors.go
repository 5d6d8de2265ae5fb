package expiry

import "errors"

var (
	// ErrInvalidTTL is returned, wrapped with the offending value, for a TTL
	// that is not positive or whose deadline would overflow. The key is left
	// unchanged.
	ErrInvalidTTL = errors.New("expiry: invalid ttl")
	// ErrClosed is returned by Expirer.Start after Close.
	ErrClosed = errors.New("expiry: closed")
)
