package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrUnreachable matches the errors of a Client whose agent did not answer:
// the connection was refused or broke (the sandbox died, or was destroyed,
// during the call).
var ErrUnreachable = errors.New("agent: sandbox unreachable")

// Error is an error reply of the agent: the request was understood and
// refused (a bad path, a missing file, a command too long).
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Client calls one agent. It is safe for concurrent use.
type Client struct {
	base, auth string
	hc         *http.Client
}

// NewClient returns a client of the agent at addr ("host:port") that uses
// hc (nil means http.DefaultClient) and sends token (Options.Token; "" for
// none). Calls are bounded by their contexts.
func NewClient(addr string, hc *http.Client, token string) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := &Client{base: "http://" + addr, hc: hc}
	if token != "" {
		c.auth = "Bearer " + token
	}
	return c
}

// BaseURL returns the agent's URL ("http://host:port").
func (c *Client) BaseURL() string { return c.base }

// Exec runs req in the sandbox and returns its result.
func (c *Client) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return ExecResult{}, err
	}
	resp, err := c.do(ctx, http.MethodPost, "/exec", bytes.NewReader(body), "application/json")
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	var res ExecResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return ExecResult{}, fmt.Errorf("%w: exec reply: %v", ErrUnreachable, err)
	}
	return res, nil
}

// Health returns nil when the agent answers /healthz.
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, "/healthz", nil, "")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// File returns the response of GET /files/p: a file's bytes or a
// directory's JSON listing. The caller closes its body.
func (c *Client) File(ctx context.Context, p string) (*http.Response, error) {
	return c.do(ctx, http.MethodGet, "/files/"+escapePath(p), nil, "")
}

// WriteFile writes r to the file p and returns the agent's JSON reply.
func (c *Client) WriteFile(ctx context.Context, p string, r io.Reader, size int64) ([]byte, error) {
	req, err := c.request(ctx, http.MethodPut, "/files/"+escapePath(p), r, "application/octet-stream")
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Export returns the work directory as a tar stream; the caller closes it.
// A stream that ends early fails its reader with an error.
func (c *Client) Export(ctx context.Context) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, "/archive", nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Import extracts the tar stream r into the work directory.
func (c *Client) Import(ctx context.Context, r io.Reader) error {
	resp, err := c.do(ctx, http.MethodPut, "/archive", r, "application/x-tar")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// SetOwner makes owner the sandbox's owner. It fails with an *Error of
// status 409 if the sandbox already has another.
func (c *Client) SetOwner(ctx context.Context, owner string) error {
	body, err := json.Marshal(OwnerBody{Owner: owner})
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPut, "/owner", bytes.NewReader(body), "application/json")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Owner returns the sandbox's owner, "" when it has none.
func (c *Client) Owner(ctx context.Context) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/owner", nil, "")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body OwnerBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 2*MaxOwner+64)).Decode(&body); err != nil {
		return "", fmt.Errorf("%w: owner reply: %v", ErrUnreachable, err)
	}
	return body.Owner, nil
}

func (c *Client) request(ctx context.Context, method, path string, body io.Reader, ctype string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	return req, nil
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, ctype string) (*http.Response, error) {
	req, err := c.request(ctx, method, path, body, ctype)
	if err != nil {
		return nil, err
	}
	return c.send(req)
}

// send sends req; a transport error matches ErrUnreachable (and the
// context's error when it ended), a 4xx or 5xx reply is an *Error.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("agent %s: %w", req.URL.Path, context.Cause(req.Context()))
		}
		return nil, fmt.Errorf("%w: %s %s: %v", ErrUnreachable, req.Method, req.URL.Path, err)
	}
	if resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb errorBody
	if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
		eb.Error = strings.TrimSpace(string(b))
	}
	return nil, &Error{Status: resp.StatusCode, Message: eb.Error}
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// Transport returns an http.Transport for agents: no proxy, short dial and
// header timeouts (an agent answers at once or is gone), a few idle
// connections per sandbox.
func Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // an exec answers when its command ends
		ExpectContinueTimeout: time.Second,
	}
}
