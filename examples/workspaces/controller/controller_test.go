package controller_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/controller"
	"github.com/ttlkit/ttlkit/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runtime is a Runtime that counts its calls and can hold a start until
// its context ends.
type runtime struct {
	mu      sync.Mutex
	calls   map[string]int
	running map[string]bool
	hold    bool // Start waits for its context
}

func newRuntime() *runtime { return &runtime{calls: map[string]int{}, running: map[string]bool{}} }

func (r *runtime) call(op, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[op+" "+id]++
}

func (r *runtime) count(op, id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[op+" "+id]
}

func (r *runtime) Start(ctx context.Context, id string) error {
	r.call("start", id)
	r.mu.Lock()
	hold := r.hold
	r.mu.Unlock()
	if hold {
		<-ctx.Done()
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[id] = true
	return nil
}

func (r *runtime) Stop(_ context.Context, id string) error {
	r.call("stop", id)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, id)
	return nil
}

func (r *runtime) Archive(_ context.Context, id string) error { r.call("archive", id); return nil }
func (r *runtime) Restore(_ context.Context, id string) error { r.call("restore", id); return nil }
func (r *runtime) Alive(_ context.Context, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id]
}

const grace = 10 * time.Second

// newController returns a controller on store whose claims are kept by a
// Manager of its own on the shared claims store: closing the Manager is
// the controller dying (its claims are no longer renewed).
func newController(t *testing.T, store entities.Store, claims lease.Store, rt controller.Runtime, name string) (*controller.Controller, *lease.Manager) {
	t.Helper()
	m, err := lease.New(controller.ClaimBudget, lease.Options{Store: claims, SweepInterval: -1})
	require.NoError(t, err)
	c, err := controller.New(store, rt, controller.Options{Standby: time.Minute, Interval: -1, Workers: 1, Claims: m, ClaimGrace: grace, Name: name})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, c.Close(context.Background()))
		_ = m.Close(context.Background())
	})
	return c, m
}

func seed(t *testing.T, store entities.Store, e entities.Entity) {
	t.Helper()
	_, err := store.Create(context.Background(), e)
	require.NoError(t, err)
}

// TestDeadControllersOperationIsTakenOver: a row whose operation no
// controller holds a claim on (its controller was killed) is taken over
// by the next controller that looks at it: the operation runs again and
// ends, with no manual reset. One whose claim is live is left to its
// holder.
func TestDeadControllersOperationIsTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := entities.NewMemoryStore(entities.MemoryStoreOptions{})
		claims := lease.NewMemoryStore(nil)
		for _, e := range []entities.Entity{
			{ID: "stopping", Phase: catalog.Running, DesiredState: catalog.Standby, Operation: catalog.OpStopping},
			{ID: "starting", Phase: catalog.Standby, DesiredState: catalog.Running, Operation: catalog.OpStarting},
			{ID: "archiving", Phase: catalog.Standby, DesiredState: catalog.Archived, Operation: catalog.OpArchiving},
		} {
			seed(t, store, e)
		}
		rt := newRuntime()
		b, _ := newController(t, store, claims, rt, "b")
		for _, id := range []string{"stopping", "starting", "archiving"} {
			require.NoError(t, b.Reconcile(ctx, id, nil))
		}
		for id, want := range map[string]string{"stopping": catalog.Standby, "starting": catalog.Running, "archiving": catalog.Archived} {
			e, err := store.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, want, e.Phase, id)
			assert.Empty(t, e.Operation, id)
			assert.Empty(t, e.DesiredState, id)
		}
		assert.Equal(t, 1, rt.count("stop", "stopping"))
		assert.Equal(t, 1, rt.count("start", "starting"))
		assert.Equal(t, 1, rt.count("archive", "archiving"))
		assert.EqualValues(t, 3, b.Stats().TakenOver)
		assert.Zero(t, b.Stats().Busy)
		live, err := claims.List(ctx)
		require.NoError(t, err)
		assert.Empty(t, live, "every claim released")
	})
}

// TestStalledControllerIsTakenOver: controller a claims a start that
// hangs, then stops renewing its claim (it is dying). While the claim is
// live, b leaves the workspace alone; once the grace has run out a's
// operation is cancelled and it leaves the row as it is, and b takes the
// operation over and ends it.
func TestStalledControllerIsTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := entities.NewMemoryStore(entities.MemoryStoreOptions{})
		claims := lease.NewMemoryStore(nil)
		seed(t, store, entities.Entity{ID: "ws", Phase: catalog.Standby, DesiredState: catalog.Running})
		rtA, rtB := newRuntime(), newRuntime()
		rtA.hold = true
		a, ma := newController(t, store, claims, rtA, "a")
		b, _ := newController(t, store, claims, rtB, "b")

		aDone := make(chan error, 1)
		go func() { aDone <- a.Reconcile(ctx, "ws", nil) }()
		synctest.Wait()
		e, err := store.Get(ctx, "ws")
		require.NoError(t, err)
		require.Equal(t, catalog.OpStarting, e.Operation, "a claimed the start")

		time.Sleep(3 * grace) // a renews its claim: b must keep off
		require.NoError(t, b.Reconcile(ctx, "ws", nil))
		assert.Zero(t, rtB.count("start", "ws"), "a live claim is its holder's")
		assert.Zero(t, b.Stats().TakenOver)

		require.NoError(t, ma.Close(ctx)) // a stops renewing
		start := time.Now()
		err = <-aDone
		assert.ErrorContains(t, err, "claim on ws lost")
		assert.LessOrEqual(t, time.Since(start), grace, "a gives up at its local deadline, before the store's")
		assert.EqualValues(t, 1, a.Stats().Abandoned)
		e, err = store.Get(ctx, "ws")
		require.NoError(t, err)
		assert.Equal(t, catalog.OpStarting, e.Operation, "a left the row to whoever takes it over")

		time.Sleep(grace)
		require.NoError(t, b.Reconcile(ctx, "ws", nil))
		e, err = store.Get(ctx, "ws")
		require.NoError(t, err)
		assert.Equal(t, catalog.Running, e.Phase)
		assert.Empty(t, e.Operation)
		assert.Equal(t, 1, rtB.count("start", "ws"))
		assert.EqualValues(t, 1, b.Stats().TakenOver)
	})
}
