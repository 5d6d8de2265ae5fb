package workspaces

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/proxy"
	"github.com/ttlkit/ttlkit/ttl"
)

// fixedRoute routes every workspace to one server.
type fixedRoute string

func (r fixedRoute) Route(context.Context, string) (string, error) { return string(r), nil }

// backend is a workspace's server: it answers "ok" to a request and echoes
// every WebSocket message.
func backend(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		for {
			typ, msg, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if err := c.Write(context.Background(), typ, msg); err != nil {
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

// workspacesProxy serves the example's proxy for workspace "ws", which
// runs at target, and returns its URL, the path prefix and the token.
func workspacesProxy(b *testing.B, target *httptest.Server) (string, string, string) {
	store := entities.NewMemoryStore(entities.MemoryStoreOptions{})
	if _, err := store.Create(context.Background(), entities.Entity{ID: "ws", Phase: catalog.Running}); err != nil {
		b.Fatal(err)
	}
	tracker, err := ttl.NewTracker(new(ttl.MemoryBuffer), ttl.TrackerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	keys, err := auth.New("bench-secret-of-16-bytes", "bench-admin-token-16", nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := proxy.New(proxy.Options{Catalog: catalog.New(store, nil), Routes: fixedRoute(strings.TrimPrefix(target.URL, "http://")),
		Recorder: tracker, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(p)
	b.Cleanup(func() {
		srv.Close()
		p.Close()
		_ = tracker.Close(context.Background())
	})
	return srv.URL, "/ws", keys.WorkspaceToken("ws", time.Now().Add(time.Hour))
}

// reverseProxy serves a plain httputil.ReverseProxy to target.
func reverseProxy(b *testing.B, target *httptest.Server) string {
	u, _ := url.Parse(target.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	srv := httptest.NewServer(rp)
	b.Cleanup(srv.Close)
	return srv.URL
}

// relay serves a plain frame relay to target: accept, dial, copy each
// message both ways, nothing else.
func relay(b *testing.B, target *httptest.Server) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bc, _, err := websocket.Dial(r.Context(), "ws"+strings.TrimPrefix(target.URL, "http")+r.URL.Path, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer bc.CloseNow()
		cc, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer cc.CloseNow()
		cc.SetReadLimit(-1)
		bc.SetReadLimit(-1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pipe := func(src, dst *websocket.Conn) {
			defer cancel()
			for {
				typ, rd, err := src.Reader(ctx)
				if err != nil {
					return
				}
				wr, err := dst.Writer(ctx, typ)
				if err != nil {
					return
				}
				if _, err := io.Copy(wr, rd); err != nil {
					return
				}
				if wr.Close() != nil {
					return
				}
			}
		}
		go pipe(bc, cc)
		pipe(cc, bc)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkProxyHTTP: one small GET through a proxy to a workspace's
// server on loopback, by 8 goroutines a core, each with keep-alive
// connections.
//
//	impl=workspaces    the example's proxy: token check, activity record, route, relay
//	impl=reverseproxy  httputil.ReverseProxy to the same server
//	impl=direct        no proxy: the server alone (the floor)
func BenchmarkProxyHTTP(b *testing.B) {
	for _, impl := range []string{"workspaces", "reverseproxy", "direct"} {
		b.Run("impl="+impl, func(b *testing.B) {
			target := backend(b)
			u, token := target.URL+"/api/files", ""
			switch impl {
			case "workspaces":
				base, prefix, tok := workspacesProxy(b, target)
				u, token = base+prefix+"/api/files", tok
			case "reverseproxy":
				u = reverseProxy(b, target) + "/api/files"
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			b.Cleanup(client.CloseIdleConnections)
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("GET", u, nil)
					if token != "" {
						req.Header.Set("Authorization", "Bearer "+token)
					}
					res, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					_ = res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Errorf("status %d", res.StatusCode)
						return
					}
				}
			})
		})
	}
}

// BenchmarkProxyWebSocket: one message sent and its echo received, on one
// open WebSocket through a proxy to a workspace's server.
//
//	impl=workspaces  the example's relay: each message recorded as activity, both ways
//	impl=relay       a plain frame relay with the same library (the floor for a proxy)
//	impl=direct      no proxy
func BenchmarkProxyWebSocket(b *testing.B) {
	for _, size := range []int{16, 4096} {
		for _, impl := range []string{"workspaces", "relay", "direct"} {
			b.Run(fmt.Sprintf("size=%d/impl=%s", size, impl), func(b *testing.B) {
				target := backend(b)
				u, hdr := target.URL+"/terminal", http.Header{}
				switch impl {
				case "workspaces":
					base, prefix, tok := workspacesProxy(b, target)
					u = base + prefix + "/terminal"
					hdr.Set("Authorization", "Bearer "+tok)
				case "relay":
					u = relay(b, target) + "/terminal"
				}
				ctx := context.Background()
				c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), &websocket.DialOptions{HTTPHeader: hdr})
				if err != nil {
					b.Fatal(err)
				}
				defer c.CloseNow()
				c.SetReadLimit(-1)
				msg := []byte(strings.Repeat("x", size))
				b.ReportAllocs()
				b.SetBytes(int64(size))
				b.ResetTimer()
				for range b.N {
					if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
						b.Fatal(err)
					}
					if _, got, err := c.Read(ctx); err != nil || len(got) != size {
						b.Fatal(len(got), err)
					}
				}
				b.StopTimer()
				_ = c.Close(websocket.StatusNormalClosure, "")
			})
		}
	}
}
