package rediskey

import (
	"strings"
	"testing"
)

func TestBase(t *testing.T) {
	for _, tc := range []struct {
		prefix, base string
		ok           bool
	}{
		{"codehub", "{codehub}:", true},
		{"app:{leases}:", "app:{leases}:", true},
		{"{t}", "{t}", true},
		{"x{", "{x{}:", true},
		{"", "", false},
		{"}x", "", false},
		{"a}b", "", false},
		{"a}{", "", false},
		{"{}x", "", false}, // an empty tag is no tag; wrapping gives "{{}x}:", tag "{"
	} {
		got, err := Base("pkg", tc.prefix)
		if (err == nil) != tc.ok {
			t.Errorf("Base(%q) error = %v, want ok=%v", tc.prefix, err, tc.ok)
			continue
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pkg: Prefix") {
				t.Errorf("Base(%q) error %q does not name the Prefix", tc.prefix, err)
			}
			continue
		}
		if got != tc.base {
			t.Errorf("Base(%q) = %q, want %q", tc.prefix, got, tc.base)
		}
		// Every key built on the base hashes by the same tag.
		t1, _ := Tag(got + "a")
		t2, _ := Tag(got + "receipt:}{zz}")
		if t1 == "" || t1 != t2 {
			t.Errorf("Base(%q) = %q: keys hash by %q and %q", tc.prefix, got, t1, t2)
		}
	}
}

func TestTag(t *testing.T) {
	for _, tc := range []struct {
		key, tag string
		ok       bool
	}{
		{"{user1000}.following", "user1000", true},
		{"foo{}{bar}", "", false},
		{"foo{{bar}}zap", "{bar", true},
		{"foo{bar}{zap}", "bar", true},
		{"plain", "", false},
		{"x}{", "", false},
	} {
		tag, ok := Tag(tc.key)
		if tag != tc.tag || ok != tc.ok {
			t.Errorf("Tag(%q) = %q, %v; want %q, %v", tc.key, tag, ok, tc.tag, tc.ok)
		}
	}
}
