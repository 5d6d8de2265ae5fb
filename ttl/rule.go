package ttl

import (
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Since names the entity timestamp a Rule measures from.
type Since int

const (
	// SinceLastActivity measures from the entity's last activity (idle
	// timeout). It is the zero value.
	SinceLastActivity Since = iota
	// SincePhaseChanged measures from when the entity's phase last changed
	// (time spent in the current phase).
	SincePhaseChanged
	// SinceCreated measures from when the entity was created (absolute
	// lifetime).
	SinceCreated
)

// Rule is one TTL of a phase state machine: an entity in Phase whose Since
// timestamp lies more than After in the past gets Then as its desired
// state.
//
// Store.Apply applies a rule as one conditional update, using the store's own
// clock as "now". An entity matches when all of these hold:
//
//   - its phase is r.Phase
//   - no operation is in progress on it, and it is not deleted
//   - its desired state is not r.Then (so applying a rule twice changes
//     nothing)
//   - its Since timestamp is set (not zero / NULL) and now - it > After
//     (strictly greater, as SQL's NOW() - last_activity_at > interval)
//
// A rule only sets the desired state; the controller woken by the Runner
// does the work and then moves the phase in its own writes to the store.
//
// An idle timeout and a time limit in the next phase:
//
//	{Name: "standby", Phase: "RUNNING", Since: SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}
//	{Name: "archive", Phase: "STANDBY", Since: SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"}
//
// An absolute lifetime:
//
//	{Name: "lifetime", Phase: "RUNNING", Since: SinceCreated, After: 8 * time.Hour, Then: "DESTROYED"}
type Rule struct {
	// Name identifies the rule in stats, events and logs. Empty means
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

// Validate reports whether r can be applied. The error wraps ErrInvalid and
// names the bad field. Every Store.Apply calls it before touching data.
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
