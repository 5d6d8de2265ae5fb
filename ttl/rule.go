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

// Rule is one TTL of a phase state machine. [Store.Apply] gives an entity
// Then as its desired state when, at the Store's now:
//
//   - its phase is Phase, it is not deleted and no operation is in progress
//   - its desired state is not Then (so applying a rule twice changes nothing)
//   - its Since timestamp is set (not zero or NULL) and now minus it is
//     strictly greater than After
//
// A rule only sets the desired state; the controller woken by the Runner
// does the work and moves the phase itself.
type Rule struct {
	// Name identifies the rule in stats, events and logs; empty means
	// "<Phase>-><Then>".
	Name string
	// Phase is the phase the rule watches. Required.
	Phase string
	// Since is the timestamp After is measured from.
	Since Since
	// After is how long past Since the entity must be. Must be positive.
	After time.Duration
	// Then is the desired state set on matching entities. Required.
	Then string
}

// String returns the rule's name, or "<Phase>-><Then>" when it has none.
func (r Rule) String() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Phase + "->" + r.Then
}

// Validate reports whether r can be applied: the error names the bad field
// and matches [ErrInvalid]. Every Store.Apply calls it first.
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
