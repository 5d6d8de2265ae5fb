// Package entitycheck holds the one rule by which ttl's database stores
// (pgttl, redisttl) refuse an entity they cannot keep exactly.
package entitycheck

import (
	"strings"
	"unicode/utf8"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
)

// Storable reports whether a store keeps the string v exactly: valid UTF-8
// (PostgreSQL text, a JSON record) without NUL bytes (PostgreSQL text, the
// separator of redisttl's index members).
func Storable(v string) bool {
	return utf8.ValidString(v) && strings.IndexByte(v, 0) < 0
}

// Create validates e for Create and CreateMany of the store named pkg: an
// ID and a Phase, and every string Storable. The error wraps
// ttl.ErrInvalid.
func Create(pkg string, e ttl.Entity) error {
	switch {
	case e.ID == "":
		return errs.Invalid(ttl.ErrInvalid, "%s: create: ID is empty", pkg)
	case e.Phase == "":
		return errs.Invalid(ttl.ErrInvalid, "%s: create %q: Phase is empty", pkg, e.ID)
	case !Storable(e.ID) || !Storable(e.Phase) || !Storable(e.DesiredState) || !Storable(e.Operation):
		return errs.Invalid(ttl.ErrInvalid, "%s: create %q: ID, Phase, DesiredState and Operation must be UTF-8 without NUL bytes", pkg, e.ID)
	}
	return nil
}
