package expiry

import "errors"

// ErrInvalid is matched by every error about a bad option or argument, whose
// message names it and its value; nothing is changed.
var ErrInvalid = errors.New("expiry: invalid argument")
