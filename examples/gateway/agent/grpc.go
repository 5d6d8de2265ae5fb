package agent

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The gRPC service is described by hand and its messages are the plain
// structs of this package, encoded as JSON by a codec both ends force: the
// three calls carry a few small fields, so generated protobuf code (and a
// protoc step to keep in sync with it) would add more than it gives.
// The wire contract is the service name, the method names and the JSON
// field names of the request and response types, and the token, when the
// server has one, in the "authorization" metadata as "Bearer <token>".

// ServiceName is the gRPC service the agent serves.
const ServiceName = "ttlkit.gateway.Agent"

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return "json" }

type empty struct{}

// service is what the gRPC server serves: the agent, behind its token.
type service struct {
	Agent
	token *[sha256.Size]byte // digest of "Bearer <token>"; nil when none is required
}

// authenticate refuses a call that does not carry the server's token,
// compared as SHA-256 digests in constant time.
func (s *service) authenticate(ctx context.Context) error {
	if s.token == nil {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) == 1 {
		got := sha256.Sum256([]byte(v[0]))
		if subtle.ConstantTimeCompare(got[:], s.token[:]) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "agent: the call does not carry the agent's token")
}

// handler checks the token before it even decodes the request.
func handler[Req, Resp any](call func(a Agent, ctx context.Context, req *Req) (Resp, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		s := srv.(*service)
		if err := s.authenticate(ctx); err != nil {
			return nil, err
		}
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		return call(s.Agent, ctx, req)
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*Agent)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Create", Handler: handler(func(a Agent, ctx context.Context, r *CreateRequest) (Worker, error) { return a.Create(ctx, *r) })},
		{MethodName: "Delete", Handler: handler(func(a Agent, ctx context.Context, r *DeleteRequest) (empty, error) { return empty{}, a.Delete(ctx, *r) })},
		{MethodName: "List", Handler: handler(func(a Agent, ctx context.Context, r *ListRequest) (ListResponse, error) {
			ws, err := a.List(ctx, *r)
			return ListResponse{Workers: ws}, err
		})},
	},
}

// NewServer returns a gRPC server that serves a. When token is not empty,
// every call must carry it (a Client Dialed with it): any other call fails
// with codes.Unauthenticated before its request is read. Whoever may call
// the agent may run any command as the agent's user: give it a token
// unless only trusted processes reach its address.
func NewServer(a Agent, token string) *grpc.Server {
	svc := &service{Agent: a}
	if token != "" {
		d := sha256.Sum256([]byte("Bearer " + token))
		svc.token = &d
	}
	s := grpc.NewServer(grpc.ForceServerCodec(jsonCodec{}))
	s.RegisterService(&serviceDesc, svc)
	return s
}

// Serve serves a on ln until the server is stopped.
func Serve(s *grpc.Server, ln net.Listener) error { return s.Serve(ln) }

// Client is an Agent reached over gRPC.
type Client struct{ cc *grpc.ClientConn }

var _ Agent = (*Client)(nil)

// bearer sends a token with every call. The connection is not encrypted
// (the agent is meant to be on the same machine or a private link), so
// it allows a plain connection.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Dial returns a client of the agent at addr (host:port, or
// unix:/path/to/socket) that sends token with every call (none when
// empty). It connects lazily.
func Dial(addr, token string) (*Client, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(jsonCodec{})), grpc.WithConnectParams(reconnect)}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{cc: cc}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }

// Create calls the agent's Create.
func (c *Client) Create(ctx context.Context, req CreateRequest) (Worker, error) {
	var w Worker
	err := c.invoke(ctx, "Create", &req, &w)
	return w, err
}

// Delete calls the agent's Delete.
func (c *Client) Delete(ctx context.Context, req DeleteRequest) error {
	return c.invoke(ctx, "Delete", &req, &empty{})
}

// List calls the agent's List.
func (c *Client) List(ctx context.Context, req ListRequest) ([]Worker, error) {
	var r ListResponse
	err := c.invoke(ctx, "List", &req, &r)
	return r.Workers, err
}

// Reconnection. By default gRPC waits longer and longer between attempts to
// connect again to an agent it lost (1 s, growing to two minutes), and
// meanwhile fails every call at once with the last attempt's error: an
// agent started again would go unused for as long. The agent is local (a
// unix socket, loopback or a private link), so the client tries again at
// least every reconnectBackoff, and a call made while the connection is
// not ready waits up to reconnectWait for it: an agent that is back serves
// it, one that is still down fails it within reconnectWait.
// (ClientConn.ResetConnectBackoff would try at once, but it reads the
// connection's map of subchannels unlocked, a data race with gRPC's own
// goroutines.)
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   reconnectBackoff,
	},
	MinConnectTimeout: 5 * time.Second,
}

const (
	reconnectBackoff = time.Second
	reconnectWait    = 2 * time.Second // past reconnectBackoff and its jitter
)

// invoke calls method once the connection is ready, or reconnectWait has
// passed (see reconnect).
func (c *Client) invoke(ctx context.Context, method string, req, resp any) error {
	if s := c.cc.GetState(); s != connectivity.Ready {
		wctx, cancel := context.WithTimeout(ctx, reconnectWait)
		for ; s != connectivity.Ready && s != connectivity.Shutdown; s = c.cc.GetState() {
			if s == connectivity.Idle {
				c.cc.Connect()
			}
			if !c.cc.WaitForStateChange(wctx, s) {
				break
			}
		}
		cancel()
	}
	return c.cc.Invoke(ctx, "/"+ServiceName+"/"+method, req, resp)
}
