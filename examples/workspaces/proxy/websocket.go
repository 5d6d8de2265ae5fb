package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// pathMatch is path.Match, as coder/websocket matches origin patterns.
var pathMatch = path.Match

// relay is one WebSocket relayed between a browser and a workspace.
type relay struct {
	client, backend *websocket.Conn
	once            sync.Once
}

// goingAway closes both ends with StatusGoingAway: the proxy shuts down.
func (c *relay) goingAway() {
	c.once.Do(func() {
		_ = c.client.Close(websocket.StatusGoingAway, "proxy shutting down")
		_ = c.backend.Close(websocket.StatusGoingAway, "proxy shutting down")
	})
}

// serveWebSocket relays a WebSocket: it connects to the workspace first
// (holding the request while the workspace starts), so that a workspace
// that cannot be reached is an HTTP error rather than a socket that
// closes at once, then accepts the browser's upgrade and copies messages
// both ways, each one recorded as activity.
func (p *Proxy) serveWebSocket(w http.ResponseWriter, r *http.Request, t target) {
	ctx, id := r.Context(), t.id
	bc, err := p.dialBackend(ctx, r, t)
	if err != nil {
		p.holdFailed(w, r, id, err)
		return
	}
	var protos []string
	if sp := bc.Subprotocol(); sp != "" {
		protos = []string{sp}
	}
	cc, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:   protos,
		OriginPatterns: p.opts.OriginPatterns, // checked already; Accept checks again
	})
	if err != nil {
		_ = bc.Close(websocket.StatusGoingAway, "client handshake failed")
		return
	}
	cc.SetReadLimit(p.opts.MaxMessage)
	bc.SetReadLimit(p.opts.MaxMessage)
	c := &relay{client: cc, backend: bc}
	p.connMu.Lock()
	if p.closed {
		p.connMu.Unlock()
		c.goingAway()
		return
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	p.connMu.Unlock()
	p.websockets.Add(1)
	p.open.Add(1)
	defer func() {
		p.open.Add(-1)
		p.connMu.Lock()
		delete(p.conns, c)
		p.connMu.Unlock()
		p.wg.Done()
	}()

	// The relay lives as long as the browser's connection, not the
	// request's context, which ends when the handler returns.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- p.pipe(rctx, id, cc, bc, &p.msgsIn) }()
	go func() { errc <- p.pipe(rctx, id, bc, cc, &p.msgsOut) }()
	err = <-errc
	// One side ended: pass its close status to the other, then stop both.
	code, reason := websocket.CloseStatus(err), ""
	if code == -1 {
		code, reason = websocket.StatusGoingAway, "peer went away"
	}
	c.once.Do(func() {
		_ = cc.Close(code, reason)
		_ = bc.Close(code, reason)
	})
	cancel()
	<-errc
}

// counter is an atomic counter of messages.
type counter interface{ Add(uint64) uint64 }

// pipe copies messages from src to dst, frame by frame (a message is
// streamed, not gathered), recording each as activity when it starts.
func (p *Proxy) pipe(ctx context.Context, id string, src, dst *websocket.Conn, n counter) error {
	for {
		typ, r, err := src.Reader(ctx)
		if err != nil {
			return err
		}
		p.opts.Recorder.Record(id)
		n.Add(1)
		wr, err := dst.Writer(ctx, typ)
		if err != nil {
			return err
		}
		if _, err := io.Copy(wr, r); err != nil {
			_ = wr.Close()
			return err
		}
		if err := wr.Close(); err != nil {
			return err
		}
	}
}

// dialBackend opens the WebSocket to the workspace's server, holding while
// the workspace starts, and once more if its server turns out to be gone.
func (p *Proxy) dialBackend(ctx context.Context, r *http.Request, t target) (*websocket.Conn, error) {
	id := t.id
	hdr := http.Header{}
	if ua := r.Header.Get("User-Agent"); ua != "" {
		hdr.Set("User-Agent", ua)
	}
	t.header(hdr)
	hdr.Set("X-Forwarded-For", clientIP(r))
	var protos []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				protos = append(protos, s)
			}
		}
	}
	dial := func(addr string) (*websocket.Conn, error) {
		u := (&url.URL{Scheme: "ws", Host: addr, Path: t.path, RawPath: t.rawPath, RawQuery: t.rawQuery}).String()
		c, res, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: p.client, HTTPHeader: hdr, Subprotocols: protos})
		if err != nil && res != nil && res.StatusCode == http.StatusMisdirectedRequest {
			err = errMisdirected
		}
		return c, err
	}
	addr, err := p.route(ctx, id)
	if err == nil {
		c, err := dial(addr)
		if err == nil {
			return c, nil
		}
		if !isRefused(err) {
			p.errs.Add(1)
			return nil, errUnreachable{err}
		}
		p.forget(id)
	}
	if addr, err = p.hold(ctx, id); err != nil {
		return nil, err
	}
	c, err := dial(addr)
	if err != nil {
		p.errs.Add(1)
		return nil, errUnreachable{err}
	}
	return c, nil
}

// errUnreachable is a workspace whose server answered the dial wrongly.
type errUnreachable struct{ error }

// Unwrap returns the dial's error.
func (e errUnreachable) Unwrap() error { return e.error }

func clientIP(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}
