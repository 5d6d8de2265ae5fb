package ttl

import (
	"fmt"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Since names the entity timestamp a Rule measures from.
type Since int

const (
	// SinceLastActivity measures from Entity.LastActivityAt (idle timeout).
	// It is the zero value.
	SinceLastActivity Since = iota
	// SincePhaseChanged measures from Entity.PhaseChangedAt (time spent in
	// the current phase).
	SincePhaseChanged
	// SinceCreated measures from Entity.CreatedAt (absolute lifetime).
	SinceCreated
)

// String returns "last_activity", "phase_changed" or "created".
func (s Since) String() string {
	switch s {
	case SinceLastActivity:
		return "last_activity"
	case SincePhaseChanged:
		return "phase_changed"
	case SinceCreated:
		return "created"
	}
	return fmt.Sprintf("Since(%d)", int(s))
}

// Of returns the timestamp of e that s names.
func (s Since) Of(e Entity) time.Time {
	switch s {
	case SincePhaseChanged:
		return e.PhaseChangedAt
	case SinceCreated:
		return e.CreatedAt
	}
	return e.LastActivityAt
}

// Rule is one TTL of a phase state machine: an entity in Phase whose Since
// timestamp lies more than After in the past gets DesiredState = Then.
//
// Store.Apply applies a rule as one conditional update, using the store's own
// clock as "now". An entity matches when all of these hold:
//
//   - Phase == r.Phase
//   - Operation == "" (no operation in progress)
//   - DeletedAt is zero (not deleted)
//   - DesiredState != r.Then (so applying a rule twice changes nothing)
//   - the Since timestamp is set (not zero / NULL) and now - it > After
//     (strictly greater, as SQL's NOW() - last_access_at > interval)
//
// A rule only sets DesiredState; the controller woken by the Runner does the
// work and then moves Phase with Store.Update.
//
// A cloud-IDE workspace system uses two rules:
//
//	{Name: "standby", Phase: "RUNNING", Since: SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}
//	{Name: "archive", Phase: "STANDBY", Since: SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"}
//
// An AI sandbox system's containers are the same machine with other rules:
//
//	{Name: "inactive", Phase: "RUNNING", Since: SinceLastActivity, After: time.Hour, Then: "DESTROYED"}
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

// Matches reports whether r fires for e at now, following the conditions in
// the Rule documentation. Memory stores and tests use it; SQL and other
// backends express the same conditions in their own language.
func (r Rule) Matches(e Entity, now time.Time) bool {
	if e.Phase != r.Phase || e.Operation != "" || !e.DeletedAt.IsZero() || e.DesiredState == r.Then {
		return false
	}
	since := r.Since.Of(e)
	return !since.IsZero() && now.Sub(since) > r.After
}
