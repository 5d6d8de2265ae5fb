package lease_test

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
)

// growthSizes are the numbers of other live leases a grant is measured
// among.
var growthSizes = []int{10, 1_000, 10_000, 100_000}

// grower opens a store of one backend holding n other live leases of cost
// 1 (live for the benchmark of one size), or skips.
type grower struct {
	name string
	open func(b *testing.B, n int) lease.Store
}

var growers = []grower{
	{"memory", func(b *testing.B, n int) lease.Store {
		s := lease.NewMemoryStore(nil)
		grantOthers(b, s, n, 1)
		return s
	}},
	{"redis", func(b *testing.B, n int) lease.Store {
		s := redisStore(b)
		grantOthers(b, s, n, 16)
		return s
	}},
	{"postgres", func(b *testing.B, n int) lease.Store {
		pool := pgtest.OpenPostgres(b).Pool
		s := pgStoreOn(b, pool)
		for _, q := range []string{
			`INSERT INTO modal_leases (id, holder, resource, cost, token, created_at, expires_at, heartbeat_at, grace_ns, deadline)
SELECT 'other-' || i, 'holder-' || i, 'cam', 1, i, now(), now() + interval '1 hour', now(), 3600000000000, now() + interval '1 hour'
FROM generate_series(1, ` + fmt.Sprint(n) + `) i`,
			`UPDATE modal_leases_state SET token = ` + fmt.Sprint(n),
			`ANALYZE modal_leases`,
		} {
			if _, err := pool.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		migrateAgain(b, s)
		return s
	}},
	{"mysql", func(b *testing.B, n int) lease.Store {
		db := mysqltest.OpenMySQL(b).DB
		s := myStoreOn(b, db)
		digits := "(SELECT 0 AS d" + strings.Repeat(" UNION ALL SELECT ?", 9) + ")"
		var from []string
		var args []any
		for i := range 5 {
			from = append(from, fmt.Sprintf("%s d%d", digits, i))
			for d := 1; d <= 9; d++ {
				args = append(args, d)
			}
		}
		for _, q := range []string{
			`INSERT INTO modal_leases (id, holder, resource, cost, token, created_at, expires_at, heartbeat_at, grace_ns, deadline)
SELECT CONCAT('other-', i), CONCAT('holder-', i), 'cam', 1, i, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR,
	UTC_TIMESTAMP(6), 3600000000000, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR
FROM (SELECT d0.d + 10*d1.d + 100*d2.d + 1000*d3.d + 10000*d4.d + 1 AS i FROM ` + strings.Join(from, ", ") + `) s
WHERE i <= ` + fmt.Sprint(n),
			`UPDATE modal_leases_state SET token = ` + fmt.Sprint(n),
			`ANALYZE TABLE modal_leases`,
		} {
			a := args
			if !strings.HasPrefix(q, "INSERT") {
				a = nil
			}
			if _, err := db.ExecContext(ctx, q, a...); err != nil {
				b.Fatal(err)
			}
		}
		migrateAgain(b, s)
		return s
	}},
}

// migrateAgain runs Migrate on a store whose rows were written behind its
// back, so that whatever it derives from them is brought up to date.
func migrateAgain(b *testing.B, s lease.Store) {
	if err := s.(interface{ Migrate(context.Context) error }).Migrate(ctx); err != nil {
		b.Fatal(err)
	}
}

// grantOthers grants n leases of cost 1 to distinct holders through s, on
// workers goroutines, with a grace of 40 s (Redis refuses more than its
// MaxGrace, 45 s): long enough for the benchmark of one size.
func grantOthers(b *testing.B, s lease.Store, n, workers int) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				_, err := s.Grant(ctx, lease.GrantArgs{ID: crand.Text(), Holder: fmt.Sprintf("holder-%d", i),
					Resource: "cam", Costs: []int{1}, TTL: time.Hour, Grace: 40 * time.Second, Budget: n + 10, OnePerHolder: true})
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// BenchmarkLeaseGrantGrowth: a grant of a 2-unit lease (1-unit fallback)
// among 10 to 100,000 other live leases, then its release. It reports the
// grant's median and 10th-percentile latency (grant-p50-ns, grant-p10-ns);
// ns/op is grant and release. A store whose grant reads every live lease
// grows with the size; one that keeps its units counted does not.
func BenchmarkLeaseGrantGrowth(b *testing.B) {
	for _, g := range growers {
		for _, n := range growthSizes {
			b.Run(fmt.Sprintf("backend=%s/others=%d/impl=ttlkit", g.name, n), func(b *testing.B) {
				s := g.open(b, n)
				m, err := lease.New(n+100, lease.Options{Store: s, SweepInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = m.Close(ctx) })
				req := lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
				var lat []time.Duration
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					l, err := m.Grant(ctx, req)
					lat = append(lat, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.Release(ctx, l.ID, ""); err != nil {
						b.Fatal(err)
					}
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "grant-p50-ns")
				b.ReportMetric(float64(lat[len(lat)/10].Nanoseconds()), "grant-p10-ns")
			})
		}
	}
}
