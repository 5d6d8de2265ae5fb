package expiry

import "errors"

// ErrInvalid matches every error about a bad option or argument; the
// error's message names the field or argument and its value. Nothing is
// changed.
var ErrInvalid = errors.New("expiry: invalid argument")
