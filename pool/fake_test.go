package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/pool"
)

// box is the test item: a container with an ID.
type box struct {
	ID string `json:"id"`
}

// fakeProv is a Provisioner with every optional interface, whose behaviour
// tests change on the fly. It keeps the provider's truth: the live items.
type fakeProv struct {
	mu          sync.Mutex
	seq         int
	prefix      string
	live        map[string]time.Time // id -> created
	maxLive     int
	creates     int
	destroys    int
	badDestroys int // destroys of items that were not live
	createErr   error
	createDelay time.Duration
	// startDelay: the item exists (is listed) from the start of Create,
	// which then waits this long for it to be ready, as a worker process
	// that starts and then warms up.
	startDelay time.Duration
	ignoreCtx  bool          // the slow start ignores its context
	hang       chan struct{} // Create blocks on it, ignoring ctx
	panicValue any
	unhealthy  map[string]bool
	destroyErr error
	// dateEarly: List dates every item this much before its creation, as
	// a provider with a coarse clock may.
	dateEarly time.Duration
	// deaths holds, per item, the channel Watch returns, closed by die;
	// watching counts the watches whose context has not ended.
	deaths   map[string]chan struct{}
	watching int
}

func newFake() *fakeProv {
	return &fakeProv{live: map[string]time.Time{}, unhealthy: map[string]bool{}, prefix: "c", deaths: map[string]chan struct{}{}}
}

var (
	_ pool.Provisioner[box] = (*fakeProv)(nil)
	_ pool.Checker[box]     = (*fakeProv)(nil)
	_ pool.Lister[box]      = (*fakeProv)(nil)
	_ pool.Watcher[box]     = (*fakeProv)(nil)
)

func (f *fakeProv) Create(ctx context.Context) (box, error) {
	f.mu.Lock()
	err, delay, hang, pv, start, ignore := f.createErr, f.createDelay, f.hang, f.panicValue, f.startDelay, f.ignoreCtx
	f.mu.Unlock()
	if start > 0 {
		if ignore {
			ctx = context.Background()
		}
		return f.createSlowStart(ctx, start)
	}
	if pv != nil {
		panic(pv)
	}
	if hang != nil {
		<-hang
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return box{}, ctx.Err()
		}
	}
	if err != nil {
		return box{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := fmt.Sprintf("%s%d", f.prefix, f.seq)
	f.live[id] = time.Now()
	f.creates++
	f.maxLive = max(f.maxLive, len(f.live))
	return box{ID: id}, nil
}

func (f *fakeProv) createSlowStart(ctx context.Context, d time.Duration) (box, error) {
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("%s%d", f.prefix, f.seq)
	f.live[id] = time.Now()
	f.creates++
	f.maxLive = max(f.maxLive, len(f.live))
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		f.vanish(id)
		return box{}, ctx.Err()
	}
	if !isLive(f, id) {
		return box{}, fmt.Errorf("worker %s destroyed while starting", id)
	}
	return box{ID: id}, nil
}

func (f *fakeProv) Destroy(_ context.Context, b box) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[b.ID]; !ok {
		f.badDestroys++
	}
	delete(f.live, b.ID)
	f.destroys++
	return f.destroyErr
}

func (f *fakeProv) Check(_ context.Context, b box) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unhealthy[b.ID] {
		return errors.New("unhealthy")
	}
	return nil
}

func (f *fakeProv) List(context.Context) ([]pool.Listed[box], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []pool.Listed[box]
	for id, c := range f.live {
		out = append(out, pool.Listed[box]{ID: id, Value: box{ID: id}, Created: c.Add(-f.dateEarly)})
	}
	return out, nil
}

func (f *fakeProv) ID(b box) string { return b.ID }

// Watch returns the channel die closes, and counts the watch until ctx
// ends.
func (f *fakeProv) Watch(ctx context.Context, b box) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.deathLocked(b.ID)
	f.watching++
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.watching--
		f.mu.Unlock()
	})
	return ch
}

func (f *fakeProv) deathLocked(id string) chan struct{} {
	ch, ok := f.deaths[id]
	if !ok {
		ch = make(chan struct{})
		f.deaths[id] = ch
	}
	return ch
}

// die kills an item as a crash does: it is no longer live, and its
// watchers learn it.
func (f *fakeProv) die(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, id)
	close(f.deathLocked(id))
}

// watches returns how many watches are running.
func (f *fakeProv) watches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watching
}

// adopt adds an item the pool did not create (a leftover or an orphan).
func (f *fakeProv) adopt(id string, created time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[id] = created
}

// vanish removes an item behind the pool's back.
func (f *fakeProv) vanish(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, id)
}

func (f *fakeProv) set(fn func(f *fakeProv)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeProv) liveIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

type counts struct{ live, creates, destroys, bad, maxLive int }

func (f *fakeProv) counts() counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return counts{len(f.live), f.creates, f.destroys, f.badDestroys, f.maxLive}
}

// plain hides every optional interface of a fakeProv.
type plain struct{ f *fakeProv }

func (p plain) Create(ctx context.Context) (box, error)  { return p.f.Create(ctx) }
func (p plain) Destroy(ctx context.Context, b box) error { return p.f.Destroy(ctx, b) }

// errOf returns the error of a janitor step.
func errOf[R any](_ R, err error) error { return err }
