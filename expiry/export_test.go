package expiry

import (
	"fmt"
	"time"
)

// CheckInvariants verifies, for tests, that every key with a deadline sits
// at its own position in its shard's slice of keys with a deadline and that
// the slice holds nothing else, that every key is in the bucket chain its
// hash names, and that the counts agree.
func (m *Map[K, V]) CheckInvariants() error {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		err := s.check(i)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *shard[K, V]) check(i int) error {
	t := s.tab.Load()
	keys, withDL := 0, 0
	var err error
	t.each(func(n *node[K, V]) {
		keys++
		if got := t.lookup(s.hash(n.key), n.key); got != n && err == nil {
			err = fmt.Errorf("shard %d: key %v is not found where its hash says", i, n.key)
		}
		if n.dl.isNone() {
			return
		}
		withDL++
		if int(n.idx) >= len(s.dl) || s.dl[n.idx] != n {
			if err == nil {
				err = fmt.Errorf("shard %d: key %v is not at its position %d", i, n.key, n.idx)
			}
		}
	})
	if err != nil {
		return err
	}
	if keys != int(s.keys.Load()) || withDL != len(s.dl) || int64(len(s.dl)) != s.withDL.Load() {
		return fmt.Errorf("shard %d: %d keys (counted %d), %d with a deadline, dl %d, withDL %d",
			i, keys, s.keys.Load(), withDL, len(s.dl), s.withDL.Load())
	}
	for j, n := range s.dl {
		if int(n.idx) != j {
			return fmt.Errorf("shard %d: dl[%d] says it is at %d", i, j, n.idx)
		}
	}
	return nil
}

// ExpireSample is the Map's Keyspace sample, for tests that drive it.
func (m *Map[K, V]) ExpireSample(now time.Time, n int) (sampled, expired int) {
	return m.expireSample(now, n)
}

// Options returns the Expirer's options with the defaults filled in.
func (e *Expirer) Options() Options { return e.opts }
