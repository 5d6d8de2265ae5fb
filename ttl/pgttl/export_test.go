package pgttl

import "github.com/ttlkit/ttlkit/ttl"

// Chunk exposes chunk to the tests.
var Chunk = chunk

// ApplySQL returns the statement Apply runs for rules measured from since.
func (s *Store) ApplySQL(since ttl.Since) string { return s.applySQL[since] }

// MergeSQL returns the statement MergeActivity runs.
func (s *Store) MergeSQL() string { return s.mergeSQL }
