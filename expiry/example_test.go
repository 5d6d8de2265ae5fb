package expiry_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/expiry"
)

func ExampleMap() {
	m, err := expiry.NewMap(expiry.MapOptions[string, string]{})
	if err != nil {
		panic(err)
	}
	defer m.Close(context.Background())

	m.Set("config", "v1", time.Time{}) // no deadline
	if err := m.SetWithTTL("session:42", "alice", 30*time.Minute); err != nil {
		panic(err)
	}
	v, ok := m.Get("session:42")
	fmt.Println(v, ok)
	d, ok := m.Deadline("config")
	fmt.Println(d.IsZero(), ok) // exists without a deadline (Redis TTL -1)
	_, ok = m.Deadline("missing")
	fmt.Println(ok) // missing (Redis TTL -2)
	d, _ = m.Deadline("session:42")
	fmt.Println(time.Until(d) > 29*time.Minute)

	err = m.SetWithTTL("config", "v2", -time.Second)
	fmt.Println(err)
	// Output:
	// alice true
	// true true
	// false
	// true
	// expiry: invalid ttl: -1s is not positive
}

// sessions is a user's own store: a plain map behind a mutex, with
// deadlines. It gets active expiry by implementing expiry.Keyspace.
type sessions struct {
	mu       sync.Mutex
	users    map[string]string
	deadline map[string]time.Time
}

// ExpireSample implements expiry.Keyspace. Go's map iteration starts at a
// random position, which is random enough for an example; a large store
// would keep the keys with a deadline in a slice and sample positions.
func (s *sessions) ExpireSample(now time.Time, n int) (sampled, expired int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, d := range s.deadline {
		if sampled == n {
			break
		}
		sampled++
		if !d.After(now) {
			delete(s.deadline, k)
			delete(s.users, k)
			expired++
		}
	}
	return sampled, expired
}

func ExampleExpirer() {
	now := time.Now()
	s := &sessions{users: map[string]string{}, deadline: map[string]time.Time{}}
	for i := range 10 {
		k := fmt.Sprint("s", i)
		s.users[k] = "user"
		s.deadline[k] = now.Add(-time.Minute) // already expired
	}
	s.users["admin"] = "root" // no deadline

	// A negative Interval runs no cycles in the background: here one
	// cycle by hand.
	e, err := expiry.NewExpirer(s, expiry.Options{SampleSize: 4, Interval: -1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	defer e.Close(ctx)
	r, err := e.Cycle(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("expired:", r.Expired, "left:", len(s.users))
	fmt.Println("rounds above the threshold repeat:", r.Rounds > 1)
	// Output:
	// expired: 10 left: 1
	// rounds above the threshold repeat: true
}
