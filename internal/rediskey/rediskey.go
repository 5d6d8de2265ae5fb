// Package rediskey builds the key prefix of every ttlkit Redis backend so
// that all of a store's keys hash to one Redis Cluster slot, with the same
// hash-tag rule Redis uses.
package rediskey

import (
	"fmt"
	"strings"
)

// Tag returns the hash tag Redis Cluster hashes key by, and whether key has
// one: the bytes between the first "{" and the first "}" after it, when
// there is at least one byte between them (Redis's keyHashSlot).
func Tag(key string) (string, bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "", false
	}
	return key[i+1 : i+1+j], true
}

// Base returns the base every key of a store starts with. A prefix that
// carries a hash tag is used as it is ("app:{leases}:"); any other becomes
// "{" + prefix + "}:". It returns an error naming the prefix when the keys
// would not share one slot: an empty prefix, or one whose "}" would close
// the added tag early (a prefix starting with "}" gives "{}...", an empty
// tag).
func Base(pkg, prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("%s: Prefix is empty", pkg)
	}
	if _, ok := Tag(prefix); ok {
		return prefix, nil
	}
	base := "{" + prefix + "}:"
	if tag, ok := Tag(base); !ok || tag != prefix {
		return "", fmt.Errorf("%s: Prefix %q: its keys would not share one Redis Cluster hash slot "+
			"(a \"}\" ends the hash tag early); use a prefix without \"}\" or one with a hash tag such as \"{name}\"", pkg, prefix)
	}
	return base, nil
}
