package httpfuzz

import (
	"context"
	"testing"
)

func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		ok             bool
	}{
		{"GET", "/a?b=c", true},
		{"PATCH", "/%2e%2e/x", true},
		{"\x01", "/", false},
		{"GE T", "/", false},
		{"", "/", false},
		{"GET", "a", false},
		{"GET", "/a b", false},
		{"GET", "/%zz", false},
	} {
		req, ok := Request(context.Background(), tc.method, tc.target, "body")
		if ok != tc.ok {
			t.Errorf("Request(%q, %q) ok = %v, want %v", tc.method, tc.target, ok, tc.ok)
			continue
		}
		if ok && (req.Method != tc.method || req.RequestURI != tc.target) {
			t.Errorf("Request(%q, %q) = %s %s", tc.method, tc.target, req.Method, req.RequestURI)
		}
	}
}

func TestSetHeader(t *testing.T) {
	req, _ := Request(context.Background(), "GET", "/", "")
	for v, ok := range map[string]bool{"text/plain": true, "a\tb": true, "\x16": false, "a\r\nb": false, "\x00": false, "\x7f": false} {
		if got := SetHeader(req, "X", v); got != ok {
			t.Errorf("SetHeader(%q) = %v, want %v", v, got, ok)
		}
	}
}
