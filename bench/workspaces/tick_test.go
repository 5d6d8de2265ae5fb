package workspaces

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/examples/entities/pgnotify"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// ticker is one implementation of the TTL runner's tick.
type ticker interface {
	tick(ctx context.Context) (synced, expired int, err error)
}

// ttlkitTick is the example's runner: ttl.Runner over the seed's table
// (pgttl: last_access_at, operation 'NONE'), the Redis sorted set
// (redisttl), waking the controllers with pg_notify.
type ttlkitTick struct{ r *ttl.Runner }

func (t ttlkitTick) tick(ctx context.Context) (int, int, error) {
	res, err := t.r.Tick(ctx)
	return res.Synced, len(res.Expired), err
}

// seedTick is the tick as the design writes it: ZRANGE the whole set,
// UPDATE last_access_at FROM unnest, ZREM what was read (losing activity
// that arrived in between), the two TTL UPDATEs ... RETURNING id, and a
// bare NOTIFY when something expired (wake_wc: the controller then
// reconciles).
type seedTick struct {
	pool  *pgxpool.Pool
	rdb   *redis.Client
	key   string
	table string
}

func (s seedTick) tick(ctx context.Context) (int, int, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.key, 0, -1).Result()
	if err != nil {
		return 0, 0, err
	}
	if len(zs) > 0 {
		ids := make([]string, len(zs))
		ats := make([]time.Time, len(zs))
		members := make([]any, len(zs))
		for i, z := range zs {
			ids[i] = z.Member.(string)
			ats[i] = time.UnixMilli(int64(z.Score))
			members[i] = z.Member
		}
		if _, err := s.pool.Exec(ctx, `UPDATE `+s.table+` w SET last_access_at = a.at
FROM unnest($1::text[], $2::timestamptz[]) AS a(id, at) WHERE w.id = a.id`, ids, ats); err != nil {
			return 0, 0, err
		}
		if err := s.rdb.ZRem(ctx, s.key, members...).Err(); err != nil {
			return 0, 0, err
		}
	}
	var expired []string
	for _, q := range []string{
		`UPDATE ` + s.table + ` SET desired_state = 'STANDBY' WHERE phase = 'RUNNING' AND operation = 'NONE' AND deleted_at IS NULL
  AND NOW() - last_access_at > make_interval(secs => 600) RETURNING id`,
		`UPDATE ` + s.table + ` SET desired_state = 'ARCHIVED' WHERE phase = 'STANDBY' AND operation = 'NONE' AND deleted_at IS NULL
  AND NOW() - phase_changed_at > make_interval(secs => 1800) RETURNING id`,
	} {
		rows, err := s.pool.Query(ctx, q)
		if err != nil {
			return 0, 0, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, 0, err
			}
			expired = append(expired, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, 0, err
		}
	}
	if len(expired) > 0 { // wake_wc(): the controller reconciles
		if _, err := s.pool.Exec(ctx, `NOTIFY workspace_wc`); err != nil {
			return 0, 0, err
		}
	}
	return len(zs), len(expired), nil
}

// BenchmarkRunnerTick: one tick of the TTL runner with 100,000 workspaces
// in PostgreSQL (the seed's table: 80 % RUNNING and active within the last
// 100 s, 20 % STANDBY), after 8,000 of them were active since the last
// tick (their activity in the Redis sorted set) and about 100 went idle
// past the standby TTL. Each implementation has a table and a key of its
// own, made the same way.
//
//	impl=workspaces  ttl.Runner (redisttl drain that loses nothing, pgttl rules, WakeExpired)
//	impl=handwritten the design's hand-written tick
func BenchmarkRunnerTick(b *testing.B) {
	const n = 100_000
	for _, impl := range []string{"workspaces", "handwritten"} {
		b.Run(fmt.Sprintf("workspaces=%d/impl=%s", n, impl), func(b *testing.B) {
			ctx := context.Background()
			pg := pgtest.OpenPostgres(b)
			rd := redistest.OpenRedis(b)
			table, key := "ws_"+impl, rd.Prefix+impl+":activity"
			store, err := pgentities.New(pg.Pool, pgttl.Options{Table: table, LastActivityColumn: "last_access_at", NoOperation: "NONE"})
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := pg.Pool.Exec(ctx, `INSERT INTO `+table+` (id, phase, last_access_at, phase_changed_at, created_at)
SELECT format('ws-%s', lpad(i::text, 7, '0')), CASE WHEN i % 5 = 0 THEN 'STANDBY' ELSE 'RUNNING' END,
       now() - (i % 100) * interval '1 second', now(), now() - interval '1 day'
FROM generate_series(0, $1 - 1) i`, n); err != nil {
				b.Fatal(err)
			}
			if _, err := pg.Pool.Exec(ctx, `VACUUM ANALYZE `+table); err != nil {
				b.Fatal(err)
			}
			var t ticker
			if impl == "workspaces" {
				buf, err := redisttl.New(rd.Client, redisttl.Options{Key: key})
				if err != nil {
					b.Fatal(err)
				}
				wake, err := pgnotify.NewNotifier(pg.Pool, "workspace_wc")
				if err != nil {
					b.Fatal(err)
				}
				r, err := ttl.NewRunner(store, workspaceRules(600*time.Second, 1800*time.Second),
					ttl.RunnerOptions{Interval: time.Hour, Buffer: buf, Wake: wake.WakeExpired})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close(ctx)
				t = ttlkitTick{r}
			} else {
				t = seedTick{pool: pg.Pool, rdb: rd.Client, key: key, table: table}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				// The same 8,000 workspaces active round after round, each
				// time a little later, as a busy system's are.
				at := float64(time.Now().Add(time.Duration(i) * time.Millisecond).UnixMilli())
				zs := make([]redis.Z, 8000)
				for j := range zs {
					zs[j] = redis.Z{Member: "ws-" + pad7((j*7919)%n), Score: at}
				}
				if err := rd.Client.ZAddGT(ctx, key, zs...).Err(); err != nil {
					b.Fatal(err)
				}
				if _, err := pg.Pool.Exec(ctx, `UPDATE `+table+` SET last_access_at = now() - interval '11 minutes'
WHERE id IN (SELECT format('ws-%s', lpad(j::text, 7, '0')) FROM generate_series($1::int, $1::int + 124) j) AND phase = 'RUNNING'`, (i*125)%(n-125)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				synced, expired, err := t.tick(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if synced < 8000 || expired == 0 {
					b.Fatalf("tick synced %d, expired %d", synced, expired)
				}
			}
		})
	}
}

func pad7(i int) string {
	s := strconv.Itoa(i)
	for len(s) < 7 {
		s = "0" + s
	}
	return s
}
