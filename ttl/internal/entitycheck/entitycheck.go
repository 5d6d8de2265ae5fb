// Package entitycheck holds the one rule by which ttl's database stores
// refuse a string they cannot keep exactly.
package entitycheck

import (
	"strings"
	"unicode/utf8"
)

// Storable reports whether a store keeps the string v exactly: valid UTF-8
// (PostgreSQL text, a JSON record) without NUL bytes (PostgreSQL text, the
// separator of redisttl's index members).
func Storable(v string) bool {
	return utf8.ValidString(v) && strings.IndexByte(v, 0) < 0
}
