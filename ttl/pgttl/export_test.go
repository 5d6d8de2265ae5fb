package pgttl

import "github.com/ttlkit/ttlkit/ttl"

// ApplySQL returns the statement Apply runs for rules measured from since.
func (s *Store) ApplySQL(since ttl.Since) string { return s.applySQL[since] }

// MergeSQL returns the statement Add runs.
func (s *Store) MergeSQL() string { return s.mergeSQL }

// Table returns the quoted name of the entity table.
func (s *Store) Table() string { return s.table }
