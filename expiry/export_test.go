package expiry

import "fmt"

// CheckInvariants verifies, for tests, that every key with a deadline has
// exactly one valid slot in its shard's deadline slice, that the counts
// agree, and that stale slots stay bounded.
func (m *Map[K, V]) CheckInvariants() error {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		err := s.check(i)
		s.mu.RUnlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *shard[K, V]) check(i int) error {
	slots := map[K]int{}
	for j := range s.dl {
		if s.valid(j) {
			slots[s.dl[j].key]++
		}
	}
	withDeadline := 0
	for k, e := range s.m {
		if e.deadline == noDeadline {
			continue
		}
		withDeadline++
		if slots[k] != 1 {
			return fmt.Errorf("shard %d: key %v has %d valid slots", i, k, slots[k])
		}
	}
	if withDeadline != s.live || int64(s.live) != s.n.Load() || len(slots) != s.live {
		return fmt.Errorf("shard %d: %d keys with a deadline, %d valid slots, live %d, n %d",
			i, withDeadline, len(slots), s.live, s.n.Load())
	}
	if stale := len(s.dl) - s.live; stale > 64 && stale > 2*s.live {
		return fmt.Errorf("shard %d: %d stale slots for %d live", i, stale, s.live)
	}
	return nil
}
