package ttl

import "errors"

// ErrInvalid is matched (errors.Is) by every error about bad input, an
// invalid Rule, option or argument, from this package and its backends.
// Nothing is changed.
var ErrInvalid = errors.New("ttl: invalid argument")
