package event

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestNilQueue(t *testing.T) {
	q := New[int](nil, 0, nil, "x")
	if q.Enabled() {
		t.Fatal("a queue without a callback is enabled")
	}
	q.Send(1)
	if q.Dropped() != 0 || q.Delivered() != 0 || q.Close(context.Background()) != nil {
		t.Fatal("a nil queue counts or fails")
	}
}

func TestOrderAndCloseDelivers(t *testing.T) {
	var mu sync.Mutex
	var got []int
	q := New(func(v int) { mu.Lock(); got = append(got, v); mu.Unlock() }, 100, nil, "x")
	for i := range 100 {
		q.Send(i)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 {
		t.Fatalf("delivered %d events before Close returned, want 100", len(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("event %d is %d: out of order", i, v)
		}
	}
	q.Send(101) // after Close: dropped, not counted, no panic
	if q.Dropped() != 0 || q.Delivered() != 100 {
		t.Fatalf("dropped %d delivered %d", q.Dropped(), q.Delivered())
	}
}

func TestFullQueueDropsWithoutBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		q := New(func(int) { <-release }, 2, nil, "x")
		q.Send(0)
		synctest.Wait() // the worker is in the callback with event 0
		for i := 1; i < 10; i++ {
			q.Send(i) // never blocks
		}
		// One event is in the callback, two are queued; the rest dropped.
		if d := q.Dropped(); d != 7 {
			t.Errorf("dropped %d, want 7", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := q.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close with a stuck callback = %v, want the ctx's deadline", err)
		}
		close(release)
		if err := q.Close(context.Background()); err != nil {
			t.Errorf("second Close = %v", err)
		}
		if q.Delivered() != 3 {
			t.Errorf("delivered %d, want 3", q.Delivered())
		}
	})
}

func TestCheckSize(t *testing.T) {
	if CheckSize("p", "EventQueue", -1) == nil || CheckSize("p", "EventQueue", MaxSize+1) == nil {
		t.Error("out-of-range sizes accepted")
	}
	if CheckSize("p", "EventQueue", 0) != nil || CheckSize("p", "EventQueue", MaxSize) != nil {
		t.Error("valid sizes refused")
	}
}

func TestPanickingCallbackDoesNotWedgeDelivery(t *testing.T) {
	var mu sync.Mutex
	var got []int
	q := New(func(v int) {
		if v == 1 {
			panic("boom")
		}
		mu.Lock()
		got = append(got, v)
		mu.Unlock()
	}, 10, nil, "x")
	for i := range 3 {
		q.Send(i)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("delivered %v, want [0 2]: the event after a panic is still delivered", got)
	}
	if q.Panics() != 1 || q.Delivered() != 2 {
		t.Errorf("panics %d, delivered %d; want 1 and 2", q.Panics(), q.Delivered())
	}
}
