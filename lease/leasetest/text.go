package leasetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// portableTextLimit is the length in bytes up to which every store accepts
// a Holder or Resource of valid UTF-8 without NUL bytes. Longer or other
// strings a store may refuse (with lease.ErrInvalid, naming the field) or
// keep exactly; see each store's documentation.
const portableTextLimit = 255

// testTextIsExact: holders, resources and ids compare byte for byte:
// trailing spaces and case make different values (a PAD SPACE collation
// would not), and what is stored is returned unchanged.
func testTextIsExact(t *testing.T, e *env) {
	const budget = 10
	a := e.args("alice", budget, 1)
	a.Resource = "cam_2f_19 "
	l := e.grant(t, a)
	if l.Resource != "cam_2f_19 " {
		t.Errorf("Resource = %q, want %q", l.Resource, "cam_2f_19 ")
	}
	for _, h := range []string{"alice ", "Alice", " alice", "alice\t"} {
		if _, err := e.s.Grant(e.ctx, e.args(h, budget, 1)); err != nil {
			t.Errorf("Grant to %q while %q holds a lease: %v, want a grant (another holder)", h, "alice", err)
		}
	}
	for _, id := range []string{l.ID + " ", strings.ToUpper(l.ID), " " + l.ID} {
		if _, err := e.s.Get(e.ctx, id); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("Get(%q) of lease %q: error = %v, want ErrNotFound", id, l.ID, err)
		}
		if _, err := e.s.Heartbeat(e.ctx, id, ""); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("Heartbeat(%q) of lease %q: error = %v, want ErrNotFound", id, l.ID, err)
		}
		if _, err := e.s.Release(e.ctx, id, ""); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("Release(%q) of lease %q: error = %v, want ErrNotFound", id, l.ID, err)
		}
	}
	if _, err := e.s.Heartbeat(e.ctx, l.ID, "alice "); !errors.Is(err, lease.ErrWrongHolder) {
		t.Errorf("Heartbeat as %q of alice's lease: error = %v, want ErrWrongHolder", "alice ", err)
	}
	e.usage(t, 5, 5)
}

// testTextLimits: every store accepts Holder and Resource of valid UTF-8
// without NUL up to portableTextLimit bytes; for anything else it either
// keeps the value exactly or refuses the grant with lease.ErrInvalid, an
// error that names the field and the problem, and stores nothing.
func testTextLimits(t *testing.T, e *env) {
	const budget = 100
	long := strings.Repeat("é", portableTextLimit/2) + "x" // 255 bytes
	a := e.args(long, budget, 1)
	a.Resource = long
	l := e.grant(t, a)
	if l.Holder != long || l.Resource != long {
		t.Errorf("a %d-byte Holder and Resource came back as %d and %d bytes", len(long), len(l.Holder), len(l.Resource))
	}
	if g, err := e.s.Get(e.ctx, l.ID); err != nil || g.Holder != long || g.Resource != long {
		t.Errorf("Get of a lease with %d-byte texts: %v", len(long), err)
	}
	units := 1
	for _, c := range []struct {
		name, value, problem string
	}{
		{"NUL byte", "nul\x00byte", "NUL"},
		{"invalid UTF-8", "bad\xffutf8", "UTF-8"},
		{"256 bytes", strings.Repeat("x", portableTextLimit+1), "bytes"},
		{"64 KiB", strings.Repeat("y", 64<<10), "bytes"},
	} {
		for _, field := range []string{"Holder", "Resource"} {
			a := e.args("h-"+c.name, budget, 1)
			if field == "Holder" {
				a.Holder = c.value
			} else {
				a.Resource = c.value
			}
			l, err := e.s.Grant(e.ctx, a)
			if err != nil {
				if !errors.Is(err, lease.ErrInvalid) {
					t.Errorf("%s with a %s: error = %v, want a grant or ErrInvalid", field, c.name, err)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, field) || !strings.Contains(msg, c.problem) {
					t.Errorf("%s with a %s: error %q should name %s and say %q", field, c.name, shorten(msg), field, c.problem)
				}
				if c.problem == "NUL" && strings.Contains(err.Error(), "UTF-8") {
					t.Errorf("%s with a NUL byte (valid UTF-8) refused as %q", field, shorten(err.Error()))
				}
				continue
			}
			units++
			g, err := e.s.Get(e.ctx, l.ID)
			if err != nil {
				t.Errorf("Get of a lease whose %s has a %s: %v", field, c.name, err)
				continue
			}
			if g.Holder != a.Holder || g.Resource != a.Resource {
				t.Errorf("a %s with a %s came back changed", field, c.name)
			}
		}
	}
	e.usage(t, units, units)
}

func shorten(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// testStampsNeverBeforeSend checks what KeepAlive relies on: the store
// stamps CreatedAt and HeartbeatAt with its clock's reading when the call
// arrived, never rounded down below the moment the caller sent it, so a
// local deadline (send time + Deadline − HeartbeatAt) is never after the
// store's. A store that rounds its clock down to whole milliseconds fails.
// It needs a store on this process's clock (Harness.LocalClock).
func testStampsNeverBeforeSend(t *testing.T, e *env) {
	early := 0
	const n = 40
	for i := range n {
		a := e.args("stamp"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1000, 1)
		sent := time.Now()
		l := e.grant(t, a)
		if l.CreatedAt.Before(sent.Truncate(time.Microsecond)) {
			early++
			if early == 1 {
				t.Errorf("CreatedAt %s is before the grant was sent (%s)", l.CreatedAt.Format(time.StampMicro), sent.Format(time.StampNano))
			}
		}
		sent = time.Now()
		h, err := e.s.Heartbeat(e.ctx, l.ID, "")
		if err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		if h.HeartbeatAt.Before(sent.Truncate(time.Microsecond)) {
			early++
			if early == 1 {
				t.Errorf("HeartbeatAt %s is before the heartbeat was sent (%s)", h.HeartbeatAt.Format(time.StampMicro), sent.Format(time.StampNano))
			}
		}
		if h.Deadline().Sub(h.HeartbeatAt) > h.Grace+time.Microsecond || h.Deadline().Sub(h.HeartbeatAt) < h.Grace-time.Microsecond && h.Deadline() != h.ExpiresAt {
			t.Errorf("Deadline − HeartbeatAt = %v, want Grace %v", h.Deadline().Sub(h.HeartbeatAt), h.Grace)
		}
	}
	if early > 0 {
		t.Errorf("%d of %d stamps were earlier than the call was sent", early, 2*n)
	}
}

// testReleaseRemembered: a store that remembers releases answers a call on
// a released lease with ErrNotFound and ErrReleased, so that a caller
// retrying a Release whose outcome was unknown learns that it took effect;
// ids never granted, and leases that expired and were swept, do not match
// ErrReleased.
func testReleaseRemembered(t *testing.T, e *env) {
	l := e.grant(t, e.args("alice", 5, 1))
	if _, err := e.s.Release(e.ctx, l.ID, "alice"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, lease.ErrNotFound) || !errors.Is(err, lease.ErrReleased) {
			t.Errorf("%s of a released lease: error = %v, want ErrNotFound and ErrReleased", op, err)
		}
	}
	_, err := e.s.Release(e.ctx, l.ID, "alice")
	check("Release", err)
	_, err = e.s.Release(e.ctx, l.ID, "")
	check("Release without holder", err)
	_, err = e.s.Heartbeat(e.ctx, l.ID, "")
	check("Heartbeat", err)
	_, err = e.s.Get(e.ctx, l.ID)
	check("Get", err)

	a := e.args("bob", 5, 1)
	a.Grace = e.u
	x := e.grant(t, a)
	e.wait(t, 1.5)
	if swept, err := e.s.Sweep(e.ctx, 10); err != nil || len(swept) != 1 {
		t.Fatalf("Sweep = %v, %v; want bob's lease", ids(swept), err)
	}
	for _, id := range []string{x.ID, newID()} {
		if _, err := e.s.Release(e.ctx, id, ""); !errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrReleased) {
			t.Errorf("Release of a lease never released: error = %v, want ErrNotFound without ErrReleased", err)
		}
	}
}
