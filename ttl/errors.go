package ttl

import "errors"

// ErrInvalid marks bad input: an invalid Rule, option or argument. Nothing
// is changed. Backends return it (wrapped) too, so callers can test with
// errors.Is.
var ErrInvalid = errors.New("ttl: invalid argument")
