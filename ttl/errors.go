package ttl

import "errors"

// ErrInvalid is matched by every error about an invalid Rule, option or
// argument, here or in a backend; such a call changes nothing.
var ErrInvalid = errors.New("ttl: invalid argument")
