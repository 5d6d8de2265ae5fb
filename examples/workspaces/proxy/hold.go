package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
)

// hold is the wait of every request for one workspace to start: the first
// request asks for it to run, the others wait with it.
type hold struct {
	done chan struct{}
	addr string
	err  error
}

// errStartTimeout is a workspace that did not start within StartTimeout.
type errStartTimeout struct {
	after     time.Duration
	phase, op string
}

// Error says how long the workspace was waited for, and where it stood.
func (e errStartTimeout) Error() string {
	return fmt.Sprintf("proxy: workspace did not start within %v (phase %s, operation %q)", e.after, e.phase, e.op)
}

var errShuttingDown = errors.New("proxy: shutting down")

// hold asks for workspace id to run, if it does not, and waits until its
// server answers, up to StartTimeout, or until ctx ends.
func (p *Proxy) hold(ctx context.Context, id string) (string, error) {
	p.held.Add(1)
	p.holdMu.Lock()
	if p.ctx.Err() != nil {
		p.holdMu.Unlock()
		return "", errShuttingDown
	}
	h := p.holds[id]
	if h == nil {
		h = &hold{done: make(chan struct{})}
		p.holds[id] = h
		p.wg.Add(1)
		go p.wait(id, h)
	}
	p.holdMu.Unlock()
	select {
	case <-h.done:
		return h.addr, h.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

func (p *Proxy) wait(id string, h *hold) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.StartTimeout)
	defer cancel()
	h.addr, h.err = p.startAndWait(ctx, id)
	p.holdMu.Lock()
	delete(p.holds, id)
	p.holdMu.Unlock()
	close(h.done)
}

// recheck is how often a held request reads the workspace's row: to see a
// deletion, and to ask again if its request to run was cleared.
const recheck = 2 * time.Second

func (p *Proxy) startAndWait(ctx context.Context, id string) (string, error) {
	start := time.Now()
	e, err := p.opts.Catalog.AskRun(ctx, id)
	if err != nil {
		return "", p.holdErr(ctx, err, e.Phase, e.Operation)
	}
	p.log.Info("proxy: holding requests while the workspace starts", "workspace", id, "phase", e.Phase, "operation", e.Operation)
	tick := time.NewTicker(p.opts.PollInterval)
	defer tick.Stop()
	checked := time.Now()
	for {
		// The held requests are activity while they wait: a workspace
		// whose start took longer than its idle timeout is not put back
		// to sleep before they are served.
		p.opts.Recorder.Record(id)
		if addr, err := p.opts.Routes.Route(ctx, id); err == nil && p.alive(ctx, id, addr) {
			p.routeMu.Lock()
			p.routes[id] = cachedRoute{addr: addr, at: time.Now()}
			p.routeMu.Unlock()
			p.log.Info("proxy: workspace up; serving the held requests", "workspace", id, "waited", time.Since(start).Round(time.Millisecond))
			return addr, nil
		}
		if time.Since(checked) >= recheck {
			checked = time.Now()
			if e, err = p.opts.Catalog.Get(ctx, id); err != nil {
				return "", p.holdErr(ctx, err, e.Phase, e.Operation)
			}
			if !e.DeletedAt.IsZero() {
				return "", catalog.ErrDeleted
			}
			if e.DesiredState != catalog.Running && e.Operation == "" {
				// Nobody is starting it (a controller found its server
				// alive and cleared the request, then it died): ask again.
				if e, err = p.opts.Catalog.AskRun(ctx, id); err != nil {
					return "", p.holdErr(ctx, err, e.Phase, e.Operation)
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", p.holdErr(ctx, ctx.Err(), e.Phase, e.Operation)
		case <-tick.C:
		}
	}
}

// holdErr names why a hold ended: the proxy shutting down, the start
// timeout, or err.
func (p *Proxy) holdErr(ctx context.Context, err error, phase, op string) error {
	switch {
	case p.ctx.Err() != nil:
		return errShuttingDown
	case ctx.Err() != nil:
		return errStartTimeout{after: p.opts.StartTimeout, phase: phase, op: op}
	}
	return err
}

// Prober is implemented by Routes that can tell whether a workspace's
// server answers (host.Host checks its process and its port).
type Prober interface {
	Alive(ctx context.Context, id string) bool
}

// alive reports whether workspace id's server, routed at addr, answers: a
// route can outlive a server that died.
func (p *Proxy) alive(ctx context.Context, id, addr string) bool {
	if pr, ok := p.opts.Routes.(Prober); ok {
		return pr.Alive(ctx, id)
	}
	return reachable(ctx, addr)
}

// reachable reports whether a server listens at addr.
func reachable(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// holdFailed answers a request whose workspace could not be reached.
func (p *Proxy) holdFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	var timeout errStartTimeout
	var unreachable errUnreachable
	switch {
	case r.Context().Err() != nil:
		return // the client left
	case errors.Is(err, catalog.ErrNotFound):
		page(w, r, http.StatusNotFound, "No such workspace", "Workspace "+id+" does not exist.")
	case errors.Is(err, catalog.ErrDeleted):
		page(w, r, http.StatusGone, "Workspace deleted", "Workspace "+id+" was deleted.")
	case errors.As(err, &timeout):
		p.holdTimeouts.Add(1)
		w.Header().Set("Retry-After", "5")
		page(w, r, http.StatusServiceUnavailable, "Workspace still starting",
			fmt.Sprintf("Workspace %s did not start within %v (it is %s%s). It will keep starting: reload this page in a moment.",
				id, timeout.after, timeout.phase, opSuffix(timeout.op)))
	case errors.Is(err, errShuttingDown):
		w.Header().Set("Retry-After", "2")
		page(w, r, http.StatusServiceUnavailable, "Proxy restarting", "This proxy is shutting down. Reload in a moment.")
	case errors.As(err, &unreachable):
		page(w, r, http.StatusBadGateway, "Workspace unreachable", "The workspace did not accept the connection.")
	default:
		p.errs.Add(1)
		p.log.Warn("proxy: cannot bring the workspace up", "workspace", id, "err", err)
		w.Header().Set("Retry-After", "5")
		page(w, r, http.StatusServiceUnavailable, "Workspace unavailable", "The workspace cannot be reached right now. Reload in a moment.")
	}
}

func opSuffix(op string) string {
	if op == "" {
		return ""
	}
	return ", " + op
}
