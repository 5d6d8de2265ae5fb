package httpfuzz

import (
	"context"
	"io"
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

func TestPad(t *testing.T) {
	req, _ := Request(context.Background(), "POST", "/", "")
	Pad(req, "{}", 5)
	b, err := io.ReadAll(req.Body)
	if err != nil || string(b) != "{}     " || req.ContentLength != -1 {
		t.Errorf("Pad: %q, %v, length %d", b, err, req.ContentLength)
	}
	Pad(req, "x", 1<<20)
	if n, _ := io.Copy(io.Discard, req.Body); n != 1<<20+1 {
		t.Errorf("Pad(1 MiB): %d bytes", n)
	}
}

func TestCarriesKey(t *testing.T) {
	for _, tc := range []struct {
		xAPIKey, authorization string
		ok                     bool
	}{
		{"k", "", true},
		{"", "Bearer k", true},
		{"", "bearer  k ", true},
		{"wrong", "Bearer k", false},
		{"", "Basic k", false},
		{"", "Bearerk", false},
		{"", "", false},
	} {
		if got := CarriesKey(tc.xAPIKey, tc.authorization, "k"); got != tc.ok {
			t.Errorf("CarriesKey(%q, %q) = %v, want %v", tc.xAPIKey, tc.authorization, got, tc.ok)
		}
	}
}
