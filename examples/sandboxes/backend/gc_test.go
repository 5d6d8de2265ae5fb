package backend

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/archive"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// counting counts the Destroy calls per sandbox.
type counting struct {
	sandbox.Provisioner
	mu       sync.Mutex
	destroys map[string]int
}

func (c *counting) Destroy(ctx context.Context, s sandbox.Sandbox) error {
	c.mu.Lock()
	c.destroys[s.ID]++
	c.mu.Unlock()
	return c.Provisioner.Destroy(ctx, s)
}

// newTestBackends returns n backends sharing one state in memory (as
// instances sharing Redis would), on process sandboxes whose agent is
// this test binary.
func newTestBackends(t *testing.T, n int) ([]*Backend, *counting) {
	proc, err := sandbox.NewProcess(sandbox.ProcessOptions{
		Agent: []string{os.Args[0], "agent"}, Label: "sbx-backend-" + t.Name(), Root: t.TempDir(),
		StopGrace: 2 * time.Second, Ready: probe.Options{Timeout: 30 * time.Second, AttemptTimeout: 2 * time.Second},
	})
	require.NoError(t, err)
	prov := &counting{Provisioner: proc, destroys: map[string]int{}}
	arch, err := archive.NewDir(t.TempDir())
	require.NoError(t, err)
	assignments := NewMemoryAssignments(nil)
	entities := entities.NewMemoryStore(entities.MemoryStoreOptions{})
	claims, err := lease.New(claimBudget, lease.Options{})
	require.NoError(t, err)
	// The warm pool is shared too, else each instance's start-up cleanup
	// would take the other's sandboxes for an earlier run's leftovers.
	inv := shared.NewMemoryInventory(nil)
	var bs []*Backend
	for range n {
		b, err := New(Config{
			Provisioner: prov, Assignments: assignments, Entities: entities, Archive: arch, Shared: true, Claims: claims, Inventory: inv,
			Grace: 2 * time.Second, GCInterval: time.Hour, HealthInterval: time.Hour, MinWarm: 1,
			// Above what a create takes on a loaded machine (an agent
			// under the race detector), as OrphanGrace must be: else one
			// instance's start-up cleanup takes the other's warm sandbox,
			// still starting, for an orphan.
			OrphanGrace: time.Minute,
			ClaimGrace:  2 * time.Second,
		})
		require.NoError(t, err)
		bs = append(bs, b)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = bs[0].Down(ctx)
		for _, b := range bs {
			require.NoError(t, b.Close(ctx))
		}
		require.NoError(t, claims.Close(ctx))
	})
	return bs, prov
}

// assigned runs a first exec in conv through b and returns its sandbox.
func assigned(t *testing.T, b *Backend, conv string) sandbox.Sandbox {
	ctx := context.Background()
	_, err := b.Exec(ctx, conv, []string{"true"}, 0)
	require.NoError(t, err)
	rec, ok, err := b.cfg.Assignments.Get(ctx, conv)
	require.NoError(t, err)
	require.True(t, ok)
	return rec.Sandbox
}

// Two instances told to destroy the same sandbox at once (both woken, or
// one woken and the other reconciling): exactly one destroys it.
func TestDestroyOnce(t *testing.T) {
	bs, prov := newTestBackends(t, 2)
	ctx := context.Background()
	sbID := assigned(t, bs[0], "c1").ID

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			assert.NoError(t, bs[i%2].destroy(ctx, "c1", sbID, ReasonLifetime, time.Time{}))
		})
	}
	wg.Wait()
	prov.mu.Lock()
	assert.Equal(t, 1, prov.destroys[sbID])
	prov.mu.Unlock()
	_, err := bs[1].cfg.Entities.Get(ctx, entityID("c1", sbID))
	assert.ErrorIs(t, err, entities.ErrNotFound, "deleted and purged")
	_, ok, _ := bs[1].cfg.Assignments.Get(ctx, "c1")
	assert.False(t, ok)
}

// An inactivity decision that finds a request in flight, or activity
// after it, is called off: the sandbox is busy after all.
func TestInactiveButBusy(t *testing.T) {
	bs, prov := newTestBackends(t, 1)
	b := bs[0]
	ctx := context.Background()
	sb := assigned(t, b, "c1")
	id := entityID("c1", sb.ID)
	before, err := b.cfg.Entities.Get(ctx, id)
	require.NoError(t, err)

	// Activity since the decision.
	time.Sleep(10 * time.Millisecond)
	_, err = b.Exec(ctx, "c1", []string{"true"}, 0)
	require.NoError(t, err)
	require.NoError(t, b.destroy(ctx, "c1", sb.ID, ReasonInactive, before.LastActivityAt))
	e, _ := b.cfg.Entities.Get(ctx, id)
	assert.True(t, e.DeletedAt.IsZero())
	assert.Empty(t, e.DesiredState, "the decision is cleared: the rule may fire again")

	// A request in flight when the destroy drains.
	done := make(chan error)
	go func() {
		_, err := b.Exec(ctx, "c1", []string{"sleep", "1"}, 0)
		done <- err
	}()
	require.Eventually(t, func() bool { r, _, _ := b.cfg.Assignments.Get(ctx, "c1"); return r.InFlight == 1 }, 5*time.Second, 5*time.Millisecond)
	e, _ = b.cfg.Entities.Get(ctx, id)
	require.NoError(t, b.destroy(ctx, "c1", sb.ID, ReasonInactive, e.LastActivityAt))
	require.NoError(t, <-done, "the exec in flight is not disturbed")
	r, ok, _ := b.cfg.Assignments.Get(ctx, "c1")
	require.True(t, ok)
	assert.Equal(t, StatusIdle, r.Status, "no longer draining")
	prov.mu.Lock()
	assert.Zero(t, prov.destroys[sb.ID])
	prov.mu.Unlock()

	// The lifetime rule waits for it (up to the grace) and destroys.
	go func() {
		_, err := b.Exec(ctx, "c1", []string{"sleep", "1"}, 0)
		done <- err
	}()
	require.Eventually(t, func() bool { r, _, _ := b.cfg.Assignments.Get(ctx, "c1"); return r.InFlight == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, b.destroy(ctx, "c1", sb.ID, ReasonLifetime, time.Time{}))
	require.NoError(t, <-done, "it finished within the grace")
	prov.mu.Lock()
	assert.Equal(t, 1, prov.destroys[sb.ID])
	prov.mu.Unlock()
}

// A destroyed sandbox leaves no record behind: its entity is purged.
func TestDestroyPurges(t *testing.T) {
	bs, _ := newTestBackends(t, 1)
	b := bs[0]
	ctx := context.Background()
	sb := assigned(t, b, "c1")
	require.NoError(t, b.destroy(ctx, "c1", sb.ID, ReasonDeleted, time.Time{}))
	all, err := b.cfg.Entities.List(ctx, entities.Filter{Deleted: true})
	require.NoError(t, err)
	assert.Empty(t, all)

	// One its destroyer deleted but could not purge goes at the next
	// Reconcile.
	_, err = b.cfg.Entities.Create(ctx, entities.Entity{ID: "c2/x", Phase: PhaseRunning, DeletedAt: time.Now()})
	require.NoError(t, err)
	require.NoError(t, b.Reconcile(ctx))
	_, err = b.cfg.Entities.Get(ctx, "c2/x")
	assert.ErrorIs(t, err, entities.ErrNotFound)
}

// A destroy whose instance died midway (its claim granted and the entity
// marked, then nothing) is taken over by another instance's Reconcile once
// the dead instance's claim lapsed, and never before.
func TestDestroyTakenOver(t *testing.T) {
	bs, prov := newTestBackends(t, 2)
	ctx := context.Background()
	sbID := assigned(t, bs[0], "c1").ID
	id := entityID("c1", sbID)
	grace := bs[1].cfg.ClaimGrace
	_, err := bs[0].claims.Grant(ctx, lease.Request{Holder: "destroy/" + id, Resource: "dead", Cost: 1, TTL: time.Hour, Grace: grace})
	require.NoError(t, err)
	granted := time.Now()
	e, err := bs[1].cfg.Entities.Get(ctx, id)
	require.NoError(t, err)
	_, err = bs[1].cfg.Entities.Update(ctx, id, entities.Update{ExpectOperation: e.Operation, Operation: "destroy:dead", DesiredState: desiredDestroy})
	require.NoError(t, err)

	destroys := func() int {
		prov.mu.Lock()
		defer prov.mu.Unlock()
		return prov.destroys[sbID]
	}
	passes := 0
	for time.Since(granted) < grace-500*time.Millisecond {
		require.NoError(t, bs[1].Reconcile(ctx))
		bs[1].wg.Wait()
		passes++
		require.Zero(t, destroys(), "taken over while the dead instance's claim was live (pass %d)", passes)
		time.Sleep(100 * time.Millisecond)
	}
	require.GreaterOrEqual(t, passes, 2, "Reconcile found the destroy waiting twice before the claim lapsed")
	require.Eventually(t, func() bool {
		if err := bs[1].Reconcile(ctx); err != nil {
			return false
		}
		bs[1].wg.Wait()
		return destroys() == 1
	}, 30*time.Second, 100*time.Millisecond, "taken over once the claim lapsed")
	_, err = bs[1].cfg.Entities.Get(ctx, id)
	assert.ErrorIs(t, err, entities.ErrNotFound, "deleted and purged")
}
