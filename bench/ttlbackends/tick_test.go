package ttlbackends

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// BenchmarkTick measures the PostgreSQL side of a cloud-IDE workspace
// system's TTL runner at scale: a table of entities (100,000; and
// 1,000,000 with TTLKIT_BENCH_FULL=1, which takes a few minutes to set up),
// 80 % of them RUNNING and idle for less than the standby TTL, 20 %
// STANDBY.
//
//   - op=tick: one Runner.Tick: drain 8,000 buffered activities from Redis
//     in pages of 1,000 (the same 8,000 active workspaces every round, as
//     between two ticks of a busy system), then the standby and archive
//     rules, which find about 100 newly idle workspaces.
//   - op=merge: one Add of 1,000 of those activities.
//   - op=standby: the standby rule alone, with nothing idle.
func BenchmarkTick(b *testing.B) {
	sizes := []int{100_000}
	if os.Getenv("TTLKIT_BENCH_FULL") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("backend=postgres/entities=%d", n), func(b *testing.B) {
			ctx := context.Background()
			pg := pgtest.OpenPostgres(b)
			rd := redistest.OpenRedis(b)
			store, err := pgentities.New(pg.Pool, pgttl.Options{Table: "workspaces"})
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			// Last active 0-99 s ago; the standby TTL is 10 minutes, and
			// the rule runs on the server's clock, so it expires only the
			// rows the benchmark ages on purpose.
			if _, err := pg.Pool.Exec(ctx, `INSERT INTO workspaces (id, phase, last_activity_at, phase_changed_at, created_at)
SELECT format('ws-%s', lpad(i::text, 7, '0')), CASE WHEN i % 5 = 0 THEN 'STANDBY' ELSE 'RUNNING' END,
       now() - (i % 100) * interval '1 second', now(), now() - interval '1 day'
FROM generate_series(0, $1 - 1) i`, n); err != nil {
				b.Fatal(err)
			}
			if _, err := pg.Pool.Exec(ctx, `VACUUM ANALYZE workspaces`); err != nil {
				b.Fatal(err)
			}
			buf, err := redisttl.New(rd.Client, redisttl.Options{Prefix: rd.Prefix})
			if err != nil {
				b.Fatal(err)
			}
			rules := workspaceRules(10*time.Minute, 30*time.Minute)
			r, err := ttl.NewRunner(store, rules, ttl.RunnerOptions{Interval: time.Hour, Buffer: buf})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close(ctx)
			// The same k workspaces are active round after round, as a busy
			// system's are between ticks, each time a little later.
			active := func(k, round int) []ttl.Activity {
				acts := make([]ttl.Activity, k)
				at := time.Now().Add(time.Duration(round) * time.Millisecond)
				for i := range acts {
					acts[i] = ttl.Activity{ID: fmt.Sprintf("ws-%07d", (i*7919)%n), At: at}
				}
				return acts
			}

			for _, index := range []string{"with", "without"} {
				if index == "without" {
					// As before: no index serves the idle rule, which scans
					// the table; every sync updates rows in place (HOT).
					if _, err := pg.Pool.Exec(ctx, `DROP INDEX workspaces_last_activity_bucket`); err != nil {
						b.Fatal(err)
					}
					if _, err := pg.Pool.Exec(ctx, `VACUUM ANALYZE workspaces`); err != nil {
						b.Fatal(err)
					}
				}
				b.Run("activityindex="+index, func(b *testing.B) { benchOps(b, ctx, pg.Pool, r, store, buf, rules, n, active) })
			}
		})
	}
}

func benchOps(b *testing.B, ctx context.Context, pool *pgxpool.Pool, r *ttl.Runner, store *pgentities.Store, buf *redisttl.Buffer, rules []ttl.Rule, n int, active func(k, round int) []ttl.Activity) {
	b.Run("op=tick", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			b.StopTimer()
			if err := buf.Add(ctx, active(8000, i)); err != nil {
				b.Fatal(err)
			}
			// About 100 RUNNING workspaces become idle per tick.
			if _, err := pool.Exec(ctx, `UPDATE workspaces SET last_activity_at = now() - interval '11 minutes'
WHERE id IN (SELECT format('ws-%s', lpad(j::text, 7, '0')) FROM generate_series($1::int, $1::int + 124) j) AND phase = 'RUNNING'`, (i*125)%(n-125)); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			res, err := r.Tick(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if res.Synced < 8000 || !res.Drained || len(res.Skipped) > 0 {
				b.Fatalf("tick synced %d, drained %v, skipped %v", res.Synced, res.Drained, res.Skipped)
			}
		}
	})
	b.Run("op=merge/n=1000", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			acts := active(1000, 1_000_000+i)
			if err := store.Add(ctx, acts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=standby", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := store.Apply(ctx, rules[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
