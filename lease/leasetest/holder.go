package leasetest

import (
	"errors"
	"testing"

	"github.com/ttlkit/ttlkit/lease"
)

// testHolderChecked: Heartbeat and Release with a holder refuse another
// holder's lease with ErrWrongHolder (live or expired) and change nothing;
// with the right holder they act as without one.
func testHolderChecked(t *testing.T, e *env) {
	a := e.args("alice", 5, 2)
	a.Grace = 2 * e.u
	l := e.grant(t, a)
	wrong := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, lease.ErrWrongHolder) {
			t.Errorf("%s as bob on alice's lease: error = %v, want ErrWrongHolder", what, err)
		}
		for _, s := range []error{lease.ErrNotFound, lease.ErrExpired, lease.ErrInvalid, lease.ErrNotApplied, lease.ErrUnknownOutcome} {
			if errors.Is(err, s) {
				t.Errorf("%s as bob: %v also matches %v", what, err, s)
			}
		}
	}
	_, err := e.s.Heartbeat(e.ctx, l.ID, "bob")
	wrong("Heartbeat", err)
	_, err = e.s.Release(e.ctx, l.ID, "bob")
	wrong("Release", err)
	got, err := e.s.Get(e.ctx, l.ID)
	if err != nil {
		t.Fatalf("Get after refused calls: %v", err)
	}
	sameLease(t, "Get after refused calls", got, l)
	e.usage(t, 2, 1)

	h, err := e.s.Heartbeat(e.ctx, l.ID, "alice")
	if err != nil {
		t.Fatalf("Heartbeat as alice: %v", err)
	}
	if h.ID != l.ID || h.HeartbeatAt.Before(l.HeartbeatAt) {
		t.Errorf("Heartbeat as alice = %+v", h)
	}
	for _, id := range []string{newID(), ""} {
		if _, err := e.s.Heartbeat(e.ctx, id, "alice"); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("Heartbeat(%q) as alice: error = %v, want ErrNotFound", id, err)
		}
		if _, err := e.s.Release(e.ctx, id, "alice"); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("Release(%q) as alice: error = %v, want ErrNotFound", id, err)
		}
	}

	// Expired: still another holder's for bob, expired for alice.
	e.wait(t, 2.5)
	_, err = e.s.Heartbeat(e.ctx, l.ID, "bob")
	wrong("Heartbeat of an expired lease", err)
	_, err = e.s.Release(e.ctx, l.ID, "bob")
	wrong("Release of an expired lease", err)
	if _, err := e.s.Heartbeat(e.ctx, l.ID, "alice"); !errors.Is(err, lease.ErrExpired) {
		t.Errorf("Heartbeat as alice of an expired lease: error = %v, want ErrExpired", err)
	}
	if _, err := e.s.Release(e.ctx, l.ID, "alice"); !errors.Is(err, lease.ErrExpired) {
		t.Errorf("Release as alice of an expired lease: error = %v, want ErrExpired", err)
	}

	// The right holder releases; the lease is gone for everyone.
	m := e.grant(t, e.args("carol", 5, 1))
	r, err := e.s.Release(e.ctx, m.ID, "carol")
	if err != nil {
		t.Fatalf("Release as carol: %v", err)
	}
	sameLease(t, "Release as carol", r, m)
	if _, err := e.s.Release(e.ctx, m.ID, "carol"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("second Release as carol: error = %v, want ErrNotFound", err)
	}
	e.usage(t, 0, 0)
}
