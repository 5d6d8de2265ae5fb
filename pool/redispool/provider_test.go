package redispool_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/pool"
)

// box is the test item: a container, described completely by its ID.
type box struct {
	ID string `json:"id"`
}

// provider is the container host every pool instance of a test shares (one
// docker daemon, say): it knows which items really exist, and which holder
// uses each one right now. It records what must never happen: an item
// destroyed while someone holds it, or handed out after it was destroyed.
// It counts destroys of items already gone, which the Provisioner contract
// allows (Destroy treats them as success).
type provider struct {
	mu       sync.Mutex
	seq      int
	live     map[string]time.Time // id -> created
	holders  map[string]string    // id -> holder
	problems []string
	twice    int // destroys of items already gone
	history  map[string][]string
}

var (
	_ pool.Provisioner[box] = (*provider)(nil)
	_ pool.Lister[box]      = (*provider)(nil)
)

func newProvider() *provider {
	return &provider{live: map[string]time.Time{}, holders: map[string]string{}, history: map[string][]string{}}
}

func (p *provider) Create(context.Context) (box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	b := box{ID: fmt.Sprintf("c%05d", p.seq)}
	p.live[b.ID] = time.Now()
	return b, nil
}

func (p *provider) Destroy(_ context.Context, b box) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.holders[b.ID]; ok {
		p.problems = append(p.problems, fmt.Sprintf("%s destroyed while held by %s", b.ID, h))
	}
	if _, ok := p.live[b.ID]; !ok {
		p.twice++
		p.history[b.ID] = append(p.history[b.ID], "destroyed again")
	}
	delete(p.live, b.ID)
	return nil
}

func (p *provider) List(context.Context) ([]pool.Listed[box], error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]pool.Listed[box], 0, len(p.live))
	for id, created := range p.live {
		out = append(out, pool.Listed[box]{ID: id, Value: box{ID: id}, Created: created})
	}
	return out, nil
}

func (p *provider) ID(b box) string { return b.ID }

// hold records that holder got b; it reports a double hold or a destroyed
// item.
func (p *provider) hold(b box, holder string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.holders[b.ID]; ok {
		p.problems = append(p.problems, fmt.Sprintf("%s handed to %s while held by %s", b.ID, holder, h))
	}
	if _, ok := p.live[b.ID]; !ok {
		p.problems = append(p.problems, fmt.Sprintf("%s handed to %s after it was destroyed", b.ID, holder))
	}
	p.holders[b.ID] = holder
}

func (p *provider) unhold(b box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.holders, b.ID)
}

// add makes an item at the provider that no pool knows, created at created.
func (p *provider) add(id string, created time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[id] = created
}

func (p *provider) isLive(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.live[id]
	return ok
}

func (p *provider) liveIDs() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for id := range p.live {
		out[id] = true
	}
	return out
}

// onEvent returns a pool.Options.OnEvent that keeps instance's events in
// the items' histories, for failure messages.
func (p *provider) onEvent(instance string) func(pool.Event) {
	return func(ev pool.Event) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.history[ev.ID] = append(p.history[ev.ID], fmt.Sprintf("%s: %s %s %v", instance, ev.Kind, ev.Reason, ev.Err))
	}
}

// twiceHistory returns the histories of the items destroyed more than once.
func (p *provider) twiceHistory() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for id, h := range p.history {
		if slices.Contains(h, "destroyed again") {
			out[id] = h
		}
	}
	return out
}

func (p *provider) destroyedTwice() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.twice
}

func (p *provider) report() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// errOf returns the error of a janitor step.
func errOf[R any](_ R, err error) error { return err }
