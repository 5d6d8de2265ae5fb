package sqllease

import (
	"regexp"
	"strings"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
)

// The names a store takes when Options leaves them empty, and the table of
// recent releases (see lease.ErrReleased).
const (
	defaultTable       = "ttlkit_leases"
	defaultStateSuffix = "_state"
	releasedSuffix     = "_released"
)

// Options configure a store. The zero value means the defaults; a bad name
// makes NewPostgres and NewMySQL return an error matching lease.ErrInvalid.
type Options struct {
	// Table is the lease table: an identifier of letters, digits and
	// underscores (at most 48, so that index names derived from it fit),
	// optionally qualified by a schema or database ("ops.modal_leases").
	// Empty means "ttlkit_leases".
	Table string
	// StateTable holds the per-store row that grants lock and that counts
	// fencing tokens: an identifier as Table, at most 63 characters.
	// Several lease tables may share one state table: each has its own
	// row, keyed by Table. Empty means Table + "_state".
	StateTable string
}

// names are the resolved, validated names of one store.
type names struct {
	table, state string // as given, possibly qualified
	released     string // Table + "_released": recent releases
	base         string // Table without its qualifier, for index names
	key          string // the store's row in the state table
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// validName reports whether s is an identifier of at most limit characters,
// optionally qualified once.
func validName(s string, limit int) bool {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if !identRE.MatchString(p) || len(p) > limit {
			return false
		}
	}
	return true
}

func (o Options) resolve() (names, error) {
	n := names{table: o.Table, state: o.StateTable}
	if n.table == "" {
		n.table = defaultTable
	}
	if !validName(n.table, 48) {
		return n, errs.Invalid(lease.ErrInvalid, "sqllease: Table %q is not a valid identifier (letters, digits, _; at most 48; optional schema.)", o.Table)
	}
	if n.state == "" {
		n.state = n.table + defaultStateSuffix
	}
	if !validName(n.state, 63) {
		return n, errs.Invalid(lease.ErrInvalid, "sqllease: StateTable %q is not a valid identifier (letters, digits, _; at most 63; optional schema.)", n.state)
	}
	if n.state == n.table {
		return n, errs.Invalid(lease.ErrInvalid, "sqllease: StateTable %q is the same as Table", o.StateTable)
	}
	n.base = n.table[strings.LastIndexByte(n.table, '.')+1:]
	n.released = n.table + releasedSuffix
	n.key = n.table
	return n, nil
}

// quote quotes every part of a validated name with q (" or `).
func quote(name string, q string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}
