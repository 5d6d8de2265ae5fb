package expiry

import "errors"

// ErrInvalid is matched by every error about a bad option or argument, which
// changes nothing.
var ErrInvalid = errors.New("expiry: invalid argument")
