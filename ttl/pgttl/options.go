package pgttl

import (
	"regexp"
	"strings"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
)

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Table is the entity table: an identifier of letters, digits and
	// underscores (at most 48), optionally qualified by a schema
	// ("ops.entities"). Empty means "ttlkit_entities". An unqualified
	// name is resolved through the connection's search_path.
	Table string
	// LastActivityColumn names the column that holds an entity's last
	// activity, for a table whose design calls it otherwise
	// (last_access_at): an identifier of letters, digits and underscores,
	// at most 48. Empty means "last_activity_at".
	LastActivityColumn string
	// NoOperation is what the operation column holds while no operation is
	// in progress, for a table whose design writes it as a word ('NONE'):
	// up to 32 letters, digits and underscores. Empty means the empty
	// string. The rules change only rows whose operation is NoOperation.
	NoOperation string
}

var (
	identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)
	wordRE  = regexp.MustCompile(`^[A-Za-z0-9_]{0,32}$`)
)

// validName reports whether s is an identifier, optionally qualified once.
func validName(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return false
		}
	}
	return true
}

// quote double-quotes every part of a validated name.
func quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, ".")
}

// table resolves and validates o.Table. It returns the quoted name and the
// bare name (without schema) for index names.
func (o Options) table() (quoted, base string, err error) {
	name := o.Table
	if name == "" {
		name = "ttlkit_entities"
	}
	if !validName(name) {
		return "", "", errs.Invalid(ttl.ErrInvalid, "pgttl: Table %q is not a valid identifier (letters, digits, _; at most 48; optional schema.)", o.Table)
	}
	return quote(name), name[strings.LastIndexByte(name, '.')+1:], nil
}

// lastActivity resolves and validates o.LastActivityColumn, returning the
// bare name (an identifier needs no quotes).
func (o Options) lastActivity() (string, error) {
	if o.LastActivityColumn == "" {
		return "last_activity_at", nil
	}
	if !identRE.MatchString(o.LastActivityColumn) {
		return "", errs.Invalid(ttl.ErrInvalid, "pgttl: LastActivityColumn %q is not a valid identifier (letters, digits, _; at most 48)", o.LastActivityColumn)
	}
	return o.LastActivityColumn, nil
}

// noOperation validates o.NoOperation and returns it with the SQL literal
// it is written as: letters, digits and underscores need no escaping, so
// the literal can sit in the partial indexes' predicates and in the rules'
// WHERE clauses, where the planner matches them.
func (o Options) noOperation() (value, literal string, err error) {
	if !wordRE.MatchString(o.NoOperation) {
		return "", "", errs.Invalid(ttl.ErrInvalid, "pgttl: NoOperation %q must be at most 32 letters, digits and _", o.NoOperation)
	}
	return o.NoOperation, "'" + o.NoOperation + "'", nil
}
