// Package ttlbackends benchmarks the two distributed stages of a cloud-IDE
// workspace system's activity pipeline against the code that system
// writes by hand:
//
//   - BenchmarkStoreSync: merging a 10000-id batch into PostgreSQL with
//     pgttl's single UPDATE ... FROM unnest(...) GREATEST, against 10000
//     single-row UPDATEs in one transaction (impl=perrow).
//   - BenchmarkBufferDrain: draining 10000 ids from the Redis ZSET with
//     redisttl's Peek + compare-and-remove (until Peek finds nothing),
//     against the hand-written lossy ZRANGE + ZREM (impl=zrangezrem).
//
// Both need real servers (TTLKIT_TEST_POSTGRES_URL, TTLKIT_TEST_REDIS_URL)
// and skip without them. Each run works in its own schema or key prefix and
// removes it afterwards.
package ttlbackends

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

const n = 10000

// activities returns n ids in a fixed random order, each with a time.
func activities(base time.Time) []ttl.Activity {
	r := rand.New(rand.NewPCG(1, 2))
	acts := make([]ttl.Activity, n)
	for i, j := range r.Perm(n) {
		acts[i] = ttl.Activity{ID: fmt.Sprintf("ws-%05d", j), At: base.Add(time.Duration(j) * time.Millisecond)}
	}
	return acts
}

// perRow is the naive sync: one UPDATE per activity, in one transaction.
func perRow(ctx context.Context, pool *pgxpool.Pool, acts []ttl.Activity) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, a := range acts {
		if _, err := tx.Exec(ctx, `UPDATE workspaces SET last_activity_at = GREATEST(last_activity_at, $2) WHERE id = $1`, a.ID, a.At); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

func BenchmarkStoreSync(b *testing.B) {
	impls := []struct {
		name string
		sync func(ctx context.Context, pool *pgxpool.Pool, store *pgentities.Store, acts []ttl.Activity) error
	}{
		{"ttlkit", func(ctx context.Context, _ *pgxpool.Pool, store *pgentities.Store, acts []ttl.Activity) error {
			return store.Add(ctx, acts)
		}},
		{"perrow", func(ctx context.Context, pool *pgxpool.Pool, _ *pgentities.Store, acts []ttl.Activity) error {
			return perRow(ctx, pool, acts)
		}},
	}
	for _, impl := range impls {
		b.Run(fmt.Sprintf("backend=postgres/n=%d/impl=%s", n, impl.name), func(b *testing.B) {
			ctx := context.Background()
			pg := pgtest.OpenPostgres(b)
			store, err := pgentities.New(pg.Pool, pgttl.Options{Table: "workspaces"})
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			base := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
			if _, err := pg.Pool.Exec(ctx, `INSERT INTO workspaces (id, phase, last_activity_at, phase_changed_at, created_at)
SELECT format('ws-%s', lpad(i::text, 5, '0')), 'RUNNING', $1, $1, $1 FROM generate_series(0, $2 - 1) i`, base, n); err != nil {
				b.Fatal(err)
			}
			if _, err := pg.Pool.Exec(ctx, `VACUUM ANALYZE workspaces`); err != nil {
				b.Fatal(err)
			}
			acts := activities(base)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				// Every round carries newer times, so every row is written.
				b.StopTimer()
				for j := range acts {
					acts[j].At = acts[j].At.Add(time.Duration(i+1) * time.Second)
				}
				b.StartTimer()
				if err := impl.sync(ctx, pg.Pool, store, acts); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var stale int
			if err := pg.Pool.QueryRow(ctx, `SELECT count(*) FROM workspaces WHERE last_activity_at = $1`, base).Scan(&stale); err != nil {
				b.Fatal(err)
			}
			if stale != 0 {
				b.Fatalf("%d rows not synced", stale)
			}
		})
	}
}

// zrangeZrem is the hand-written drain: read everything, then remove every member
// read, whether or not it changed in between.
func zrangeZrem(ctx context.Context, c redis.UniversalClient, key string) (int, error) {
	zs, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil || len(zs) == 0 {
		return 0, err
	}
	acts := make([]ttl.Activity, len(zs))
	members := make([]any, len(zs))
	for i, z := range zs {
		id := z.Member.(string)
		acts[i] = ttl.Activity{ID: id, At: time.UnixMilli(int64(z.Score)).UTC()}
		members[i] = id
	}
	_ = acts // the store update goes here
	if err := c.ZRem(ctx, key, members...).Err(); err != nil {
		return 0, err
	}
	return len(acts), nil
}

func BenchmarkBufferDrain(b *testing.B) {
	var key string // the sorted set of the run
	impls := []struct {
		name  string
		drain func(ctx context.Context, c redis.UniversalClient, buf *redisttl.Buffer) (int, error)
	}{
		{"ttlkit", func(ctx context.Context, _ redis.UniversalClient, buf *redisttl.Buffer) (int, error) {
			// As the Runner drains: walk the buffer with Peek, Remove
			// every page, until a page comes back short.
			total := 0
			var after ttl.Activity
			for {
				acts, err := buf.Peek(ctx, after, n)
				if err != nil || len(acts) == 0 {
					return total, err
				}
				removed, err := buf.Remove(ctx, acts)
				if err != nil {
					return total, err
				}
				total += removed
				if len(acts) < n {
					return total, nil
				}
				after = acts[len(acts)-1]
			}
		}},
		{"zrangezrem", func(ctx context.Context, c redis.UniversalClient, buf *redisttl.Buffer) (int, error) {
			return zrangeZrem(ctx, c, key)
		}},
	}
	for _, impl := range impls {
		b.Run(fmt.Sprintf("backend=redis/n=%d/impl=%s", n, impl.name), func(b *testing.B) {
			ctx := context.Background()
			rd := redistest.OpenRedis(b)
			key = rd.Prefix + "activity"
			buf, err := redisttl.New(rd.Client, redisttl.Options{Key: key})
			if err != nil {
				b.Fatal(err)
			}
			acts := activities(time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := buf.Add(ctx, acts); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				got, err := impl.drain(ctx, rd.Client, buf)
				if err != nil {
					b.Fatal(err)
				}
				if got != n {
					b.Fatalf("drained %d, want %d", got, n)
				}
			}
		})
	}
}
