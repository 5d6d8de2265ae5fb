package ttl

import (
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Since names the entity timestamp a Rule measures from.
type Since int

const (
	SinceLastActivity Since = iota // last activity (the zero value): an idle timeout
	SincePhaseChanged              // last change of phase
	SinceCreated                   // creation: an absolute lifetime
)

// Rule is one TTL of a phase state machine. [Store.Apply] sets Then as the
// desired state of each entity in Phase, not deleted, with no operation in
// progress and a desired state other than Then (so a second Apply changes
// nothing), whose Since timestamp is set and more than After (strictly)
// before now. The controller woken by the Runner does the work and moves
// the phase itself.
type Rule struct {
	Name  string        // for stats, events and logs; empty means "<Phase>-><Then>"
	Phase string        // the phase watched; required
	Since Since         // what After is measured from
	After time.Duration // must be positive
	Then  string        // the desired state to set; required
}

// String returns the rule's name, or "<Phase>-><Then>" when it has none.
func (r Rule) String() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Phase + "->" + r.Then
}

// Validate reports whether r can be applied, with an error that names the
// bad field and matches [ErrInvalid]. Every Store.Apply calls it first.
func (r Rule) Validate() error {
	switch {
	case r.Phase == "":
		return errs.Invalid(ErrInvalid, "ttl: rule %s: Phase is empty", r)
	case r.Then == "":
		return errs.Invalid(ErrInvalid, "ttl: rule %s: Then is empty", r)
	case r.After <= 0:
		return errs.Invalid(ErrInvalid, "ttl: rule %s: After (%v) must be positive", r, r.After)
	case r.Since < SinceLastActivity || r.Since > SinceCreated:
		return errs.Invalid(ErrInvalid, "ttl: rule %s: unknown Since (%d)", r, int(r.Since))
	}
	return nil
}
