package ttl_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/ttl"
)

// entity is a row of a system's own table: what a Rule reads.
type entity struct {
	phase, desired                 string
	lastActivity, changed, created time.Time
}

// table is a system's table of entities, in memory here: all that ttl
// asks of it is a Store's Add and Apply.
type table struct {
	mu   sync.Mutex
	rows map[string]*entity
}

// Add merges activity, greater wins.
func (t *table) Add(_ context.Context, acts []ttl.Activity) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range acts {
		if e, ok := t.rows[a.ID]; ok && a.At.After(e.lastActivity) {
			e.lastActivity = a.At
		}
	}
	return nil
}

// Apply sets r.Then on every entity that r matches now.
func (t *table) Apply(_ context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	var out []ttl.Expiry
	for id, e := range t.rows {
		since := map[ttl.Since]time.Time{ttl.SinceLastActivity: e.lastActivity, ttl.SincePhaseChanged: e.changed, ttl.SinceCreated: e.created}[r.Since]
		if e.phase == r.Phase && e.desired != r.Then && now.Sub(since) > r.After {
			e.desired = r.Then
			out = append(out, ttl.Expiry{ID: id, Rule: r.String(), Then: r.Then, LastActivityAt: e.lastActivity, DecidedAt: now})
		}
	}
	return out, nil
}

// Example wires the pipeline in one process: a Tracker records activity, a
// MemoryBuffer stands in for a shared buffer, the system's table is the
// Store, and a Runner applies the rules and wakes the controller. Flush and
// Tick are called by hand here; their loops call them every 30 and 60 s.
func Example() {
	ctx := context.Background()
	old := time.Now().Add(-11 * time.Minute)
	store := &table{rows: map[string]*entity{
		"ws-1": {phase: "RUNNING", lastActivity: old, changed: old, created: old},
		"ws-2": {phase: "RUNNING", lastActivity: old, changed: old, created: old},
	}}
	buffer := new(ttl.MemoryBuffer)

	tracker, err := ttl.NewTracker(buffer, ttl.TrackerOptions{})
	if err != nil {
		panic(err)
	}
	defer tracker.Close(ctx)
	rules := []ttl.Rule{
		{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"},
		{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"},
	}
	runner, err := ttl.NewRunner(store, rules, ttl.RunnerOptions{
		Buffer: buffer,
		Wake: func(_ context.Context, expired []ttl.Expiry) error {
			var ids []string
			for _, x := range expired {
				ids = append(ids, x.ID+" ("+x.Rule+" -> "+x.Then+")")
			}
			slices.Sort(ids)
			fmt.Println("wake controller:", ids)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	defer runner.Close(ctx)

	// Both last active 11 minutes ago; one gets a request now.
	tracker.Record("ws-1") // in the proxy, per request or WebSocket message

	if _, err := tracker.Flush(ctx); err != nil {
		panic(err)
	}
	res, err := runner.Tick(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("synced:", res.Synced)
	for _, id := range []string{"ws-1", "ws-2"} {
		fmt.Printf("%s: phase %s, desired %q\n", id, store.rows[id].phase, store.rows[id].desired)
	}
	// Output:
	// wake controller: [ws-2 (standby -> STANDBY)]
	// synced: 1
	// ws-1: phase RUNNING, desired ""
	// ws-2: phase RUNNING, desired "STANDBY"
}

// ExampleRule prints two sets of rules: an idle timeout with a time limit
// in the next phase, and an idle timeout with an absolute lifetime.
func ExampleRule() {
	entities := []ttl.Rule{
		{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"},
		{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"},
	}
	containers := []ttl.Rule{
		{Name: "inactive", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: time.Hour, Then: "DESTROYED"},
		{Name: "lifetime", Phase: "RUNNING", Since: ttl.SinceCreated, After: 8 * time.Hour, Then: "DESTROYED"},
	}
	for _, r := range append(entities, containers...) {
		since := map[ttl.Since]string{ttl.SinceLastActivity: "last activity", ttl.SincePhaseChanged: "phase change", ttl.SinceCreated: "creation"}[r.Since]
		fmt.Printf("%s: %s for %v since %s -> %s\n", r, r.Phase, r.After, since, r.Then)
	}
	// Output:
	// standby: RUNNING for 10m0s since last activity -> STANDBY
	// archive: STANDBY for 30m0s since phase change -> ARCHIVED
	// inactive: RUNNING for 1h0m0s since last activity -> DESTROYED
	// lifetime: RUNNING for 8h0m0s since creation -> DESTROYED
}

// ExampleBuffer shows the race-free drain: an update that lands between Peek
// and Remove is kept.
func ExampleBuffer() {
	ctx := context.Background()
	buf := new(ttl.MemoryBuffer)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	_ = buf.Add(ctx, []ttl.Activity{{ID: "ws-1", At: t0}, {ID: "ws-2", At: t0}})

	batch, _ := buf.Peek(ctx, ttl.Activity{}, 100)
	// ... the batch is written to the store; meanwhile ws-1 is active again:
	_ = buf.Add(ctx, []ttl.Activity{{ID: "ws-1", At: t0.Add(time.Second)}})
	removed, _ := buf.Remove(ctx, batch)

	left, _ := buf.Peek(ctx, ttl.Activity{}, 100)
	fmt.Println("removed:", removed)
	fmt.Println("kept:", left[0].ID, left[0].At.Format(time.TimeOnly))
	// Output:
	// removed: 1
	// kept: ws-1 10:00:01
}
