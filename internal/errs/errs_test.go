package errs

import (
	"context"
	"errors"
	"testing"
)

var errInvalid = errors.New("pkg: invalid argument")

func TestInvalid(t *testing.T) {
	err := Invalid(errInvalid, "pkg: MinIdle (%d) > MaxSize (%d)", 5, 2)
	if err.Error() != "pkg: MinIdle (5) > MaxSize (2)" {
		t.Errorf("message %q", err)
	}
	if !errors.Is(err, errInvalid) {
		t.Error("does not match its sentinel")
	}
}

func TestWrap(t *testing.T) {
	backend := errors.New("connection reset")
	if Wrap(context.Background(), "pkg", "op", nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
	err := Wrap(context.Background(), "pkg", "op", backend)
	if err.Error() != "pkg: op: connection reset" || !errors.Is(err, backend) {
		t.Errorf("Wrap = %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("shutting down")
	cancel(stop)
	err = Wrap(ctx, "pkg", "op", backend)
	if !errors.Is(err, stop) || !errors.Is(err, backend) || !errors.Is(err, context.Canceled) {
		t.Errorf("Wrap on a cancelled ctx = %v, want the cause, context.Canceled and the backend error", err)
	}
	plain, cancelPlain := context.WithCancel(context.Background())
	cancelPlain()
	if err := Wrap(plain, "pkg", "op", backend); !errors.Is(err, context.Canceled) || !errors.Is(err, backend) {
		t.Errorf("Wrap on a plainly cancelled ctx = %v", err)
	}
	if err := Wrap(plain, "pkg", "op", context.Canceled); err.Error() != "pkg: op: context canceled" {
		t.Errorf("Wrap of the ctx's own error repeats it: %v", err)
	}
	if errors.Is(Wrap(context.Background(), "pkg", "op", backend), context.Canceled) {
		t.Error("a live ctx's error matches context.Canceled")
	}
	if err := Canceled(ctx, "pkg", "op"); !errors.Is(err, stop) || !errors.Is(err, context.Canceled) {
		t.Errorf("Canceled = %v", err)
	}
	if Canceled(context.Background(), "pkg", "op") != nil {
		t.Error("Canceled on a live ctx is not nil")
	}
}

func TestMark(t *testing.T) {
	classA, classB := errors.New("class a"), errors.New("class b")
	cause := errors.New("connection reset")
	err := Mark(cause, classA, classA, classB)
	if err.Error() != "connection reset" || !errors.Is(err, classA) || !errors.Is(err, cause) {
		t.Errorf("Mark = %v: want the cause's message, matching the cause and class a", err)
	}
	if again := Mark(err, classB, classA, classB); again != err {
		t.Errorf("an error already marked is marked again: %v", again)
	}
	if Mark(nil, classA) != nil {
		t.Error("nil is marked")
	}
}
