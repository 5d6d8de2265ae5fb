// Package httpfuzz turns a fuzzer's strings into the HTTP requests a server
// could receive, for fuzz tests of HTTP handlers: inputs net/http would
// refuse before any handler runs are skipped, so that a failure is always
// the handler's.
package httpfuzz

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Request returns the request method target would make, with body, as the
// server's parser leaves it, or false when net/http would refuse it (a
// method that is not a token, a target that is not an origin-form URI).
func Request(ctx context.Context, method, target, body string) (*http.Request, bool) {
	if !token(method) || !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \t\r\n") {
		return nil, false
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, false
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1/", strings.NewReader(body))
	if err != nil {
		return nil, false
	}
	req.URL, req.RequestURI, req.Host = u, target, "127.0.0.1"
	return req, true
}

// token reports whether s is an HTTP token (RFC 9110), as a method must be.
func token(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// SetHeader sets header k to v when v is a value net/http's server would
// accept (it answers 400 to a value with control characters before any
// handler runs), and reports whether it did.
func SetHeader(req *http.Request, k, v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	return true
}

// Pad makes req's body body followed by n blanks, its length unknown: a
// body over a handler's size limit that is the fuzzer's body up to there.
func Pad(req *http.Request, body string, n int64) {
	req.Body = io.NopCloser(io.MultiReader(strings.NewReader(body), io.LimitReader(blanks{}, n)))
	req.ContentLength = -1
}

// blanks reads as an endless run of spaces.
type blanks struct{}

func (blanks) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// CarriesKey reports whether a request whose X-Api-Key and Authorization
// headers are xAPIKey and authorization carries key the way the examples'
// APIs take one: in X-Api-Key, else as the token of "Authorization: Bearer
// <key>" (the scheme in any case, blanks around the token ignored).
func CarriesKey(xAPIKey, authorization, key string) bool {
	if xAPIKey != "" {
		return xAPIKey == key
	}
	scheme, token, ok := strings.Cut(authorization, " ")
	return ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) == key
}
