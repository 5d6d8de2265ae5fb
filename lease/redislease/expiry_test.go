package redislease_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
)

// TestAbandonedHolderLosesLease is a camera page's abandoned browser tab: a
// holder takes the whole budget and stops heartbeating. Another instance is
// refused until Grace has passed on the server's clock, then gets the units;
// the abandoned lease reads as expired and one sweep reports it.
func TestAbandonedHolderLosesLease(t *testing.T) {
	const grace = 300 * time.Millisecond
	r := redistest.OpenRedis(t)
	var (
		mu      sync.Mutex
		expired []lease.Lease
	)
	tab := newManager(t, 2, lease.Options{Store: newStore(t, r.Client, storePrefix(r)), Grace: grace, SweepInterval: -1})
	other := newManager(t, 2, lease.Options{
		Store: newStore(t, r.NewClient(t), storePrefix(r)), Grace: grace, SweepInterval: 20 * time.Millisecond,
		OnEvent: func(e lease.Event) {
			if e.Kind == lease.EventExpired {
				mu.Lock()
				expired = append(expired, e.Lease)
				mu.Unlock()
			}
		},
	})

	start := time.Now()
	l, err := tab.Grant(ctx, lease.Request{Holder: "tab", Resource: "cam_2f_19", Cost: 2})
	require.NoError(t, err)
	_, err = other.Grant(ctx, lease.Request{Holder: "bob", Cost: 1})
	require.ErrorIs(t, err, lease.ErrOverCapacity)

	var got lease.Lease
	require.Eventually(t, func() bool {
		got, err = other.Grant(ctx, lease.Request{Holder: "bob", Cost: 2})
		return err == nil
	}, 3*time.Second, 10*time.Millisecond, "units never came back: %v", err)
	assert.GreaterOrEqual(t, time.Since(start), grace-10*time.Millisecond, "granted before the grace passed")
	assert.Equal(t, 2, got.Cost)
	_, err = tab.Heartbeat(ctx, l.ID, "")
	assert.True(t, errors.Is(err, lease.ErrExpired) || errors.Is(err, lease.ErrNotFound), "heartbeat after grace: %v", err)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(expired) > 0
	}, 3*time.Second, 10*time.Millisecond, "no sweep reported the abandoned lease")
	require.NoError(t, other.Close(ctx))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, expired, 1)
	assert.Equal(t, l.ID, expired[0].ID)
	assert.Equal(t, l.HeartbeatAt, expired[0].HeartbeatAt)
	_, err = tab.Get(ctx, l.ID)
	require.ErrorIs(t, err, lease.ErrNotFound)
}

// partition makes every command of a client fail while on, as a network
// partition between one instance and Redis would.
type partition struct{ on atomic.Bool }

var errPartitioned = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("partitioned")}

func (p *partition) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *partition) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p.on.Load() {
			cmd.SetErr(errPartitioned)
			return errPartitioned
		}
		return next(ctx, cmd)
	}
}

func (p *partition) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestKeepAliveReportsLoss runs KeepAlive against Redis: it keeps a lease
// live well past its grace; when the instance is cut off from Redis its
// heartbeats stop and KeepAlive reports the loss by its own conservative
// deadline, no later than the server drops the lease; and when another
// instance releases the lease, the next heartbeat reports it lost.
func TestKeepAliveReportsLoss(t *testing.T) {
	const grace = 400 * time.Millisecond
	r := redistest.OpenRedis(t)
	p := &partition{}
	c := r.NewClient(t)
	c.AddHook(p)
	m := newManager(t, 10, lease.Options{Store: newStore(t, c, storePrefix(r)), Grace: grace, SweepInterval: -1})
	peer := newManager(t, 10, lease.Options{Store: newStore(t, r.Client, storePrefix(r)), Grace: grace, SweepInterval: -1})

	l, err := m.Grant(ctx, lease.Request{Holder: "alice", Cost: 1})
	require.NoError(t, err)
	k := m.KeepAlive(ctx, l, 50*time.Millisecond)
	time.Sleep(2 * grace)
	require.NoError(t, k.Err())
	live, err := peer.Get(ctx, l.ID)
	require.NoError(t, err, "KeepAlive did not keep the lease live")
	assert.True(t, live.HeartbeatAt.After(l.HeartbeatAt))

	// Cut off: heartbeats fail; KeepAlive gives up before the server does.
	p.on.Store(true)
	cut := time.Now()
	select {
	case <-k.Done():
	case <-time.After(3 * grace):
		t.Fatal("KeepAlive did not report the loss")
	}
	lostAfter := time.Since(cut)
	require.ErrorIs(t, k.Err(), lease.ErrLost)
	// By the local deadline: at most grace after the cut (plus scheduling).
	assert.LessOrEqual(t, lostAfter, grace+grace/2)
	// The server dropped the lease within grace of the last heartbeat that
	// reached it, and not before KeepAlive reported the loss.
	last, err := peer.Get(ctx, l.ID)
	if err == nil {
		assert.True(t, time.Now().Before(last.Deadline().Add(grace/2)), "the server kept the lease past its deadline")
		require.Eventually(t, func() bool {
			_, err := peer.Get(ctx, l.ID)
			return errors.Is(err, lease.ErrExpired)
		}, 2*grace, 10*time.Millisecond)
	} else {
		require.ErrorIs(t, err, lease.ErrExpired)
	}
	p.on.Store(false)

	// Released by another instance: the next heartbeat reports the loss.
	l2, err := m.Grant(ctx, lease.Request{Holder: "bob", Cost: 1})
	require.NoError(t, err)
	k2 := m.KeepAlive(ctx, l2, 30*time.Millisecond)
	_, err = peer.Release(ctx, l2.ID, "")
	require.NoError(t, err)
	select {
	case <-k2.Done():
	case <-time.After(grace):
		t.Fatal("KeepAlive did not report the release by another instance")
	}
	require.ErrorIs(t, k2.Err(), lease.ErrLost)
	require.ErrorIs(t, k2.Err(), lease.ErrNotFound)
}
