package sqllease_test

import (
	crand "crypto/rand"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// testTextAndTime: strings a column cannot hold are bad input (ErrInvalid,
// nothing stored), and store times are right whatever the session's time
// zone: CreatedAt is the real instant, ExpiresAt − CreatedAt is the TTL,
// and a lease expires after its grace.
func testTextAndTime(t *testing.T, s lease.Store, maxLen int) {
	args := func(holder string) lease.GrantArgs {
		return lease.GrantArgs{ID: crand.Text(), Holder: holder, Resource: "cam_2f_19", Costs: []int{1},
			TTL: time.Hour, Grace: 400 * time.Millisecond, Budget: 5, OnePerHolder: true}
	}
	bad := []string{"nul\x00byte", "bad\xffutf8"}
	if maxLen > 0 {
		bad = append(bad, strings.Repeat("x", maxLen+1))
	}
	for _, h := range bad {
		_, err := s.Grant(ctx, args(h))
		assert.ErrorIs(t, err, lease.ErrInvalid, "holder %q", h)
	}
	a := args("ユーザー🙂")
	a.Resource = "カメラ_2F"
	l, err := s.Grant(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, "ユーザー🙂", l.Holder)
	assert.WithinDuration(t, time.Now(), l.CreatedAt, 5*time.Second, "CreatedAt is the real instant")
	assert.Equal(t, time.Hour, l.ExpiresAt.Sub(l.CreatedAt))
	g, err := s.Get(ctx, l.ID)
	require.NoError(t, err)
	assert.True(t, g.CreatedAt.Equal(l.CreatedAt) && g.Holder == l.Holder && g.Resource == l.Resource)
	units, n, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 1}, [2]int{units, n}, "nothing stored by the bad grants")
	require.Eventually(t, func() bool {
		_, err := s.Get(ctx, l.ID)
		return errors.Is(err, lease.ErrExpired)
	}, 5*time.Second, 20*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(l.CreatedAt), 400*time.Millisecond-5*time.Millisecond)
}

func TestPostgresTextAndTimeZone(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	cfg, err := pgxpool.ParseConfig(pg.URL())
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["timezone"] = "Pacific/Kiritimati" // UTC+14
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	testTextAndTime(t, newPG(t, pool, sqllease.Options{}), 0)
}

func TestMySQLTextAndTimeZone(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	cfg, err := mysql.ParseDSN(my.DSN)
	require.NoError(t, err)
	// A session time zone far from UTC and a driver that would read
	// DATETIMEs as local time: neither may shift the store's times.
	cfg.Loc, err = time.LoadLocation("Pacific/Pago_Pago") // UTC-11
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+13:00'"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var tz string
	require.NoError(t, db.QueryRow("SELECT @@session.time_zone").Scan(&tz))
	require.Equal(t, "+13:00", tz)
	testTextAndTime(t, newMy(t, db, sqllease.Options{}), 255)
}
