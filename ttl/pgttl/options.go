package pgttl

import (
	"regexp"
	"strings"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
)

// DefaultTable is the entity table used when Options.Table is empty.
const DefaultTable = "ttlkit_entities"

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Table is the entity table: an identifier of letters, digits and
	// underscores (at most 48), optionally qualified by a schema
	// ("ops.workspaces"). Empty means DefaultTable ("ttlkit_entities"). An unqualified name
	// is resolved through the connection's search_path.
	Table string
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

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
		name = DefaultTable
	}
	if !validName(name) {
		return "", "", errs.Invalid(ttl.ErrInvalid, "pgttl: Table %q is not a valid identifier (letters, digits, _; at most 48; optional schema.)", o.Table)
	}
	return quote(name), name[strings.LastIndexByte(name, '.')+1:], nil
}
