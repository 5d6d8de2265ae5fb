package sqllease_test

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// counterState reads, in one statement, the store's counter of units and
// the units of the leases whose deadline is after the counter's horizon:
// the two are equal whenever no transaction is half done (a statement sees
// none), and after a grant or sweep the horizon is that call's now.
type counterState func(t *testing.T) (used, counted int64)

// testCounter runs a random mix of grants (short and long graces),
// heartbeats, releases, expiries and sweeps from four goroutines, and
// checks the counter against the rows after every step; at the end, with
// the short leases expired and swept, the counter equals Usage's units.
func testCounter(t *testing.T, s lease.Store, state counterState) {
	const budget = 12
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 26))
			for range 60 {
				mu.Lock()
				var id string
				if len(ids) > 0 {
					id = ids[rng.IntN(len(ids))]
				}
				mu.Unlock()
				var err error
				switch op := rng.IntN(10); {
				case op < 4 || id == "":
					grace := time.Minute
					if rng.IntN(2) == 0 {
						grace = time.Duration(20+rng.IntN(150)) * time.Millisecond
					}
					var l lease.Lease
					l, err = s.Grant(ctx, lease.GrantArgs{ID: crand.Text(), Holder: fmt.Sprintf("h%d", rng.IntN(10)),
						Costs: []int{1 + rng.IntN(3), 1}, TTL: time.Minute, Grace: grace, Budget: budget, OnePerHolder: true})
					if err == nil {
						mu.Lock()
						ids = append(ids, l.ID)
						mu.Unlock()
					}
				case op < 6:
					_, err = s.Heartbeat(ctx, id, "")
				case op < 8:
					_, err = s.Release(ctx, id, "")
				case op < 9:
					_, err = s.Sweep(ctx, 1+rng.IntN(3))
				default:
					time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
				}
				var re *lease.RejectedError
				if err != nil && !errors.As(err, &re) && !errors.Is(err, lease.ErrExpired) && !errors.Is(err, lease.ErrNotFound) {
					t.Errorf("unexpected error: %v", err)
					return
				}
				used, counted := state(t)
				if used != counted {
					t.Errorf("counter %d, leases after the horizon %d", used, counted)
					return
				}
			}
		}()
	}
	wg.Wait()

	time.Sleep(200 * time.Millisecond) // every short grace has passed
	for {
		out, err := s.Sweep(ctx, 100)
		require.NoError(t, err)
		if len(out) == 0 {
			break
		}
	}
	used, counted := state(t)
	units, _, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, counted, used)
	assert.Equal(t, int64(units), used, "the counter after a sweep is the units of the live leases")
	assert.LessOrEqual(t, units, budget)
}

func TestPostgresCounter(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	s := newPG(t, pg.Pool, sqllease.Options{})
	testCounter(t, s, func(t *testing.T) (used, counted int64) {
		// From the workers' goroutines too: assert, not require.
		assert.NoError(t, pg.Pool.QueryRow(ctx, `SELECT s.used,
	COALESCE((SELECT SUM(cost) FROM ttlkit_leases WHERE deadline > s.horizon), 0)
FROM ttlkit_leases_state s WHERE name = 'ttlkit_leases'`).Scan(&used, &counted))
		return used, counted
	})
}

func TestMySQLCounter(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	s := newMy(t, my.DB, sqllease.Options{})
	testCounter(t, s, func(t *testing.T) (used, counted int64) {
		assert.NoError(t, my.DB.QueryRowContext(ctx, `SELECT s.used,
	COALESCE((SELECT SUM(cost) FROM ttlkit_leases WHERE deadline > s.horizon), 0)
FROM ttlkit_leases_state s WHERE name = 'ttlkit_leases'`).Scan(&used, &counted))
		return used, counted
	})
}

// testMigrateCounter: a state table made by an earlier version (no
// counter) over live and expired leases gets the counter from Migrate,
// set to the live leases' units, and grants keep to the budget.
func testMigrateCounter(t *testing.T, s migrator, exec func(string) error) {
	args := func(holder string, cost int, grace time.Duration) lease.GrantArgs {
		return lease.GrantArgs{ID: crand.Text(), Holder: holder, Costs: []int{cost}, TTL: time.Minute,
			Grace: grace, Budget: 6, OnePerHolder: true}
	}
	for _, a := range []lease.GrantArgs{args("a", 2, time.Minute), args("b", 1, time.Minute), args("gone", 3, 50*time.Millisecond)} {
		_, err := s.Grant(ctx, a)
		require.NoError(t, err)
	}
	require.NoError(t, exec("ALTER TABLE ttlkit_leases_state DROP COLUMN used, DROP COLUMN horizon"))
	time.Sleep(100 * time.Millisecond) // "gone" expires
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Migrate(ctx), "a second Migrate")

	_, err := s.Grant(ctx, args("c", 4, time.Minute))
	var re *lease.RejectedError
	require.True(t, errors.As(err, &re), "4 units with 3 of 6 in use: %v", err)
	assert.Equal(t, 3, re.Available)
	_, err = s.Grant(ctx, args("c", 3, time.Minute))
	require.NoError(t, err)
	units, n, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{6, 3}, [2]int{units, n})
	swept, err := s.Sweep(ctx, 10)
	require.NoError(t, err)
	assert.Len(t, swept, 1, "the expired lease is still swept once")
}

func TestPostgresMigratesCounter(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	testMigrateCounter(t, newPG(t, pg.Pool, sqllease.Options{}),
		func(q string) error { _, err := pg.Pool.Exec(ctx, q); return err })
}

func TestMySQLMigratesCounter(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	testMigrateCounter(t, newMy(t, my.DB, sqllease.Options{}),
		func(q string) error { _, err := my.DB.ExecContext(ctx, q); return err })
}
