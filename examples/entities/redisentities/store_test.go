package redisentities_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/examples/entities/redisentities"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
)

func newStore(t *testing.T) (*redisentities.Store, *redistest.Redis) {
	t.Helper()
	r := redistest.OpenRedis(t)
	s, err := redisentities.New(r.Client, redisentities.Options{Prefix: r.Prefix})
	require.NoError(t, err)
	return s, r
}

// serverNow is the Redis server's TIME, the store's now.
func serverNow(t *testing.T, c redis.UniversalClient) time.Time {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	require.NoError(t, err)
	return now
}

func TestStoreConformance(t *testing.T) {
	var c redis.UniversalClient
	h := entitiestest.StoreHarness{
		New: func(t *testing.T) entities.Store {
			s, r := newStore(t)
			c = r.Client
			return s
		},
		Now: func(t *testing.T) time.Time { return serverNow(t, c) },
	}
	entitiestest.RunStore(t, h)
}

func TestStoreValidates(t *testing.T) {
	c := redis.NewClient(&redis.Options{})
	defer c.Close()
	_, err := redisentities.New(nil, redisentities.Options{Prefix: "x"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, "client")
	_, err = redisentities.New(c, redisentities.Options{})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, "Prefix")
	_, err = redisentities.New(c, redisentities.Options{Prefix: "}x"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)

	s, err := redisentities.New(c, redisentities.Options{Prefix: "sandboxes"})
	require.NoError(t, err)
	assert.Equal(t, []string{"{sandboxes}:entities", "{sandboxes}:ids", "{sandboxes}:since:last",
		"{sandboxes}:since:changed", "{sandboxes}:since:created"}, s.Keys())
}

// TestStoreRefusesUnstorable checks that values the records or indexes
// cannot hold are refused before anything reaches the server.
func TestStoreRefusesUnstorable(t *testing.T) {
	s, r := newStore(t)
	ctx := context.Background()
	now := serverNow(t, r.Client)
	for name, e := range map[string]entities.Entity{
		"NUL in phase":     {ID: "a", Phase: "RUN\x00NING"},
		"invalid UTF-8 id": {ID: "\xff", Phase: "RUNNING"},
		"before 1970":      {ID: "b", Phase: "RUNNING", CreatedAt: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)},
		"after 2255":       {ID: "c", Phase: "RUNNING", LastActivityAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		_, err := s.CreateMany(ctx, []entities.Entity{{ID: "ok", Phase: "RUNNING"}, e})
		assert.ErrorIs(t, err, ttl.ErrInvalid, name)
	}
	_, err := s.Get(ctx, "ok")
	assert.ErrorIs(t, err, entities.ErrNotFound, "a refused batch wrote nothing")

	mustCreate(t, s, entities.Entity{ID: "w", Phase: "RUNNING", LastActivityAt: now.Add(-time.Hour)})
	err = s.Add(ctx, []ttl.Activity{{ID: "w", At: now}, {ID: "w", At: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)}})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, `"w"`)
	got, err := s.Get(ctx, "w")
	require.NoError(t, err)
	assert.True(t, got.LastActivityAt.Equal(now.Add(-time.Hour).Truncate(time.Microsecond)), "a refused merge merged nothing")

	_, err = s.Update(ctx, "w", entities.Update{Phase: "A\x00B"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	_, err = s.Apply(ctx, ttl.Rule{Phase: "RUNNING", After: time.Minute, Then: "X\x00"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
}

func mustCreate(t *testing.T, s entities.Store, e entities.Entity) entities.Entity {
	t.Helper()
	got, err := s.Create(context.Background(), e)
	require.NoError(t, err)
	return got
}

// TestStoreApplyPages checks an Apply over more entities than one script
// reads, some of them not eligible (an operation in progress, deleted, in
// another phase, already decided), from several stores at once: every
// eligible entity is returned by exactly one Apply, and no other is.
func TestStoreApplyPages(t *testing.T) {
	s, r := newStore(t)
	ctx := context.Background()
	now := serverNow(t, r.Client)
	old := now.Add(-2 * time.Hour)
	var es []entities.Entity
	want := map[string]bool{}
	for i := range 2500 {
		e := entities.Entity{ID: fmt.Sprintf("e%05d", i), Phase: "RUNNING", LastActivityAt: old.Add(time.Duration(i) * time.Millisecond), CreatedAt: old}
		switch i % 10 {
		case 1:
			e.Operation = "STOPPING"
		case 2:
			e.DeletedAt = now
		case 3:
			e.Phase = "STANDBY"
		case 4:
			e.DesiredState = "STANDBY"
		case 5:
			e.LastActivityAt = now
		default:
			want[e.ID] = true
		}
		es = append(es, e)
	}
	_, err := s.CreateMany(ctx, es)
	require.NoError(t, err)

	rule := ttl.Rule{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: time.Hour, Then: "STANDBY"}
	got := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 3 {
		other, err := redisentities.New(r.NewClient(t), redisentities.Options{Prefix: r.Prefix})
		require.NoError(t, err)
		wg.Go(func() {
			exps, err := other.Apply(ctx, rule)
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			for _, x := range exps {
				got[x.ID]++
				assert.Equal(t, "standby", x.Rule)
				assert.False(t, x.DecidedAt.Before(now), "DecidedAt is the server's now")
			}
		})
	}
	wg.Wait()
	assert.Len(t, got, len(want))
	for id, n := range got {
		assert.True(t, want[id], "%s was not eligible", id)
		assert.Equal(t, 1, n, "%s returned by %d Applies", id, n)
	}
	exps, err := s.Apply(ctx, rule)
	require.NoError(t, err)
	assert.Empty(t, exps, "a second Apply changes nothing")
}

// TestStoreIndexFollowsUpdates checks that Apply sees an entity where its
// phase, activity and deletion put it, after each kind of write.
func TestStoreIndexFollowsUpdates(t *testing.T) {
	s, r := newStore(t)
	ctx := context.Background()
	now := serverNow(t, r.Client)
	mustCreate(t, s, entities.Entity{ID: "w", Phase: "RUNNING", LastActivityAt: now.Add(-time.Hour), CreatedAt: now.Add(-2 * time.Hour)})
	archive := ttl.Rule{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: time.Minute, Then: "ARCHIVED"}
	lifetime := ttl.Rule{Name: "lifetime", Phase: "STANDBY", Since: ttl.SinceCreated, After: time.Hour, Then: "DESTROYED"}
	idle := ttl.Rule{Name: "idle", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 30 * time.Minute, Then: "STANDBY"}

	// Fresh activity takes it out of the idle rule's reach.
	require.NoError(t, s.Add(ctx, []ttl.Activity{{ID: "w", At: now}}))
	exps, err := s.Apply(ctx, idle)
	require.NoError(t, err)
	assert.Empty(t, exps)

	// Moving to STANDBY: the phase just changed, so archive does not fire,
	// but lifetime (created two hours ago) does, in the new phase.
	_, err = s.Update(ctx, "w", entities.Update{Phase: "STANDBY"})
	require.NoError(t, err)
	exps, err = s.Apply(ctx, archive)
	require.NoError(t, err)
	assert.Empty(t, exps)
	exps, err = s.Apply(ctx, lifetime)
	require.NoError(t, err)
	require.Len(t, exps, 1)
	assert.Equal(t, "w", exps[0].ID)

	// Deleted: no rule sees it again, whatever its times.
	_, err = s.Update(ctx, "w", entities.Update{ExpectDesiredState: "DESTROYED", ClearDesiredState: true, Delete: true})
	require.NoError(t, err)
	exps, err = s.Apply(ctx, lifetime)
	require.NoError(t, err)
	assert.Empty(t, exps)
	keys, err := r.Client.ZCard(ctx, s.Keys()[4]).Result()
	require.NoError(t, err)
	assert.Zero(t, keys, "a deleted entity leaves the indexes")
}

// A purged entity leaves nothing in Redis: a system that creates an
// entity per resource does not grow without bound.
func TestStorePurgeLeavesNothing(t *testing.T) {
	s, r := newStore(t)
	ctx := context.Background()
	for i := range 1500 { // more than one script's chunk
		id := fmt.Sprintf("sb%04d", i)
		mustCreate(t, s, entities.Entity{ID: id, Phase: "RUNNING"})
		_, err := s.Update(ctx, id, entities.Update{Phase: "DESTROYED", Delete: true})
		require.NoError(t, err)
	}
	var ids []string
	for i := range 1500 {
		ids = append(ids, fmt.Sprintf("sb%04d", i))
	}
	n, err := s.Purge(ctx, ids)
	require.NoError(t, err)
	assert.Equal(t, 1500, n)
	exist, err := r.Client.Exists(ctx, s.Keys()...).Result()
	require.NoError(t, err)
	assert.Zero(t, exist, "no key is left")
}
