package docker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
)

// This file watches containers for their death through the engine's event
// stream: one subscription per Provisioner (to the "die" and "destroy"
// events of its label's containers), running while at least one watch
// does, shared by every watch.

// Bounds of the wait before the event stream is opened again after it
// broke (the engine restarted, say).
const (
	minResubscribe = 100 * time.Millisecond
	maxResubscribe = 5 * time.Second
)

// watcher is a Provisioner's watches and the subscription that serves them.
type watcher struct {
	mu    sync.Mutex
	byID  map[string]map[*watch]struct{}
	stop  context.CancelFunc // ends the subscription; nil when none runs
	alive chan struct{}      // closed when the running subscription's stream is open
}

// watch is one Watch call's: dead is closed once, when the container dies.
type watch struct {
	dead chan struct{}
	once sync.Once
}

func (w *watch) fire() { w.once.Do(func() { close(w.dead) }) }

// Watch returns a channel that is closed once c has died (its process
// exited, it was killed, stopped or removed), and is closed already if it
// is not running; nil when ctx has ended. A pool uses it to destroy a
// container that died while idle at once.
//
// The Provisioner learns of deaths from the engine's event stream, which
// it opens at the first watch and closes when the last one ends (with its
// ctx): a Provisioner that nobody watches holds no connection and runs no
// goroutine. When the stream breaks, it is opened again and every watched
// container is inspected, so that no death in between is missed.
func (p *Provisioner) Watch(ctx context.Context, c Container) <-chan struct{} {
	if ctx.Err() != nil {
		return nil // nobody to tell
	}
	w := &watch{dead: make(chan struct{})}
	if c.ID == "" { // no container, nothing alive
		w.fire()
		return w.dead
	}
	alive := p.watches.add(p, c.ID, w)
	context.AfterFunc(ctx, func() { p.watches.remove(c.ID, w) })
	// A death before the subscription began is not in the stream: the
	// container's state tells. Wait (briefly) for the stream to be open,
	// so that a death after this inspect is in it.
	select {
	case <-alive:
	case <-ctx.Done():
	case <-time.After(maxResubscribe):
	}
	if err := p.running(ctx, c); errors.Is(err, ErrExited) {
		w.fire()
	}
	return w.dead
}

// add registers w for container id and starts the subscription when none
// runs. It returns a channel closed once the subscription's stream is open.
func (ws *watcher) add(p *Provisioner, id string, w *watch) <-chan struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byID[id] == nil {
		ws.byID[id] = map[*watch]struct{}{}
	}
	ws.byID[id][w] = struct{}{}
	if ws.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		ws.stop = cancel
		ws.alive = make(chan struct{})
		go p.subscribe(ctx, ws.alive)
	}
	return ws.alive
}

// remove drops w and ends the subscription when no watch is left.
func (ws *watcher) remove(id string, w *watch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.byID[id], w)
	if len(ws.byID[id]) == 0 {
		delete(ws.byID, id)
	}
	if len(ws.byID) == 0 && ws.stop != nil {
		ws.stop()
		ws.stop = nil
	}
}

// fire reports the death of container id to its watches.
func (ws *watcher) fire(id string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.byID[id] {
		w.fire()
	}
}

// ids returns the containers watched now.
func (ws *watcher) ids() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]string, 0, len(ws.byID))
	for id := range ws.byID {
		out = append(out, id)
	}
	return out
}

// subscribe reads the engine's events for this Provisioner's containers
// until ctx ends, opening the stream again when it breaks; alive is closed
// once the stream is first open.
func (p *Provisioner) subscribe(ctx context.Context, alive chan struct{}) {
	filters := make(client.Filters).
		Add("type", string(events.ContainerEventType)).
		Add("event", string(events.ActionDie), string(events.ActionDestroy)).
		Add("label", LabelPool+"="+p.opts.Label)
	wait := minResubscribe
	first := true
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		res := p.cli.Events(sctx, client.EventsListOptions{Filters: filters})
		// Events returns once the engine has answered (or failed to): the
		// subscription is in place from here on.
		if first {
			close(alive)
			first = false
		} else {
			// Deaths while the stream was broken are not in the new one.
			p.recheck(ctx)
		}
		opened := time.Now()
		p.readEvents(ctx, res)
		cancel()
		if time.Since(opened) > maxResubscribe {
			wait = minResubscribe // it had worked for a while
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			wait = min(2*wait, maxResubscribe)
		}
	}
}

// readEvents fires the watches of the containers that die until the stream
// ends.
func (p *Provisioner) readEvents(ctx context.Context, res client.EventsResult) {
	for {
		select {
		case m := <-res.Messages:
			p.watches.fire(m.Actor.ID)
		case err := <-res.Err:
			if err != nil && ctx.Err() == nil && p.opts.Logger != nil {
				p.opts.Logger.Warn("docker: event stream broke; opening it again", "label", p.opts.Label, "err", err)
			}
			return
		}
	}
}

// recheck inspects every watched container and fires the watches of those
// that are not running.
func (p *Provisioner) recheck(ctx context.Context) {
	for _, id := range p.watches.ids() {
		if errors.Is(p.running(ctx, Container{ID: id}), ErrExited) {
			p.watches.fire(id)
		}
	}
}
