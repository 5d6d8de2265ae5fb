package expiry

import "fmt"

// CheckInvariants verifies, for tests, that every shard's deadline slice
// holds exactly the keys with a deadline, each at the position its entry
// records.
func (m *Map[K, V]) CheckInvariants() error {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		withDeadline := 0
		for k, e := range s.m {
			if e.deadline == noDeadline {
				continue
			}
			withDeadline++
			if e.idx < 0 || e.idx >= len(s.dl) || s.dl[e.idx] != k {
				s.mu.RUnlock()
				return fmt.Errorf("shard %d: key %v has idx %d, not its position", i, k, e.idx)
			}
		}
		n := len(s.dl)
		s.mu.RUnlock()
		if withDeadline != n || int64(n) != s.n.Load() {
			return fmt.Errorf("shard %d: %d keys with a deadline, dl has %d, n says %d", i, withDeadline, n, s.n.Load())
		}
	}
	return nil
}
