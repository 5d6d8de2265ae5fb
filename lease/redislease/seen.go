package redislease

import "sync"

// seen is what a Store last saw of the store's state: its generation (a
// random id the state gets when it is created, and again when a grant
// finds it lost), its version (a counter of the grants, heartbeats and
// releases) and its window (how long a lease granted so far can stay live
// after a loss). A grant sends them, and a state that is missing, of
// another generation, or of a lower version than the Store saw has lost
// writes that the Store's callers were told of; grants then wait for the
// longest window the Store or the state knows. Only the replies of acknowledged
// writes count (not those that Options.WaitReplicas replicas did not
// acknowledge, which a failover may undo, nor reads): what was seen must
// survive a failover that loses nothing.
type seen struct {
	mu  sync.Mutex
	gen string // "" before the first reply
	v   int64
	win int64 // µs; only grows
}

// get returns the generation and version last seen, and the longest
// window.
func (s *seen) get() (gen string, v, win int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.v, s.win
}

// saw records the generation, version and window (nil if the reply has
// none) of a reply. Of one generation the highest version counts; another
// generation replaces what was seen: the grant that made it decided
// whether it was a loss, and a grant that still sends the one before (a
// reply that came late) finds a generation it did not see, which holds
// grants back only for the window from when that generation was made.
func (s *seen) saw(gen, v, win any) {
	g, ok := gen.(string)
	n, ok2 := v.(int64)
	if !ok || !ok2 || g == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := win.(int64); ok && w > s.win {
		s.win = w
	}
	if g != s.gen {
		s.gen, s.v = g, n
	} else if n > s.v {
		s.v = n
	}
}
