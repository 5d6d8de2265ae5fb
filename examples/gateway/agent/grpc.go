package agent

import (
	"context"
	"encoding/json"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The gRPC service is described by hand and its messages are the plain
// structs of this package, encoded as JSON by a codec both ends force: the
// three calls carry a few small fields, so generated protobuf code (and a
// protoc step to keep in sync with it) would add more than it gives.
// The wire contract is the service name, the method names and the JSON
// field names of the request and response types.

// ServiceName is the gRPC service the agent serves.
const ServiceName = "ttlkit.gateway.Agent"

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return "json" }

type empty struct{}

func handler[Req, Resp any](call func(a Agent, ctx context.Context, req *Req) (Resp, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		return call(srv.(Agent), ctx, req)
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

// NewServer returns a gRPC server that serves a.
func NewServer(a Agent) *grpc.Server {
	s := grpc.NewServer(grpc.ForceServerCodec(jsonCodec{}))
	s.RegisterService(&serviceDesc, a)
	return s
}

// Serve serves a on ln until the server is stopped.
func Serve(s *grpc.Server, ln net.Listener) error { return s.Serve(ln) }

// Client is an Agent reached over gRPC.
type Client struct{ cc *grpc.ClientConn }

var _ Agent = (*Client)(nil)

// Dial returns a client of the agent at addr (host:port). It connects
// lazily.
func Dial(addr string) (*Client, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(jsonCodec{})))
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
	err := c.cc.Invoke(ctx, "/"+ServiceName+"/Create", &req, &w)
	return w, err
}

// Delete calls the agent's Delete.
func (c *Client) Delete(ctx context.Context, req DeleteRequest) error {
	return c.cc.Invoke(ctx, "/"+ServiceName+"/Delete", &req, &empty{})
}

// List calls the agent's List.
func (c *Client) List(ctx context.Context, req ListRequest) ([]Worker, error) {
	var r ListResponse
	err := c.cc.Invoke(ctx, "/"+ServiceName+"/List", &req, &r)
	return r.Workers, err
}
