package main

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/redislease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// The design's tables (§7). On PostgreSQL modal_leases is lease/sqllease's
// table, with its columns: lease_id is id, user_id holder, camera_id
// resource, the quality is the cost, last_heartbeat heartbeat_at. On MySQL,
// where the design writes its DDL, sqllease's table is modal_lease_records
// and modal_leases is a view of it with the design's columns (§7.1).
const (
	leaseTable        = "modal_leases"
	mysqlRecordsTable = "modal_lease_records"
	metricsTable      = "admission_metrics"
	// seatTable holds the UI users' seats (seats.go), sqllease's table
	// on both databases.
	seatTable = "ui_user_seats"
	// seatPrefix names the seats in Redis, under REDIS_PREFIX.
	seatPrefix = "ui_user_seats"
)

// Backend is where leases, UI user seats and admission_metrics live.
type Backend struct {
	Leases  lease.Store // nil means a lease.NewMemoryStore
	Seats   lease.Store // likewise, for the seats
	History History
	Close   func() error
}

// openBackend connects to the store cfg names and creates its tables (the
// migrations are idempotent, so every instance runs them at start-up).
func openBackend(ctx context.Context, cfg Config) (Backend, error) {
	switch cfg.Store {
	case "mysql":
		mc, err := mysql.ParseDSN(cfg.DSN)
		if err != nil {
			return Backend{}, fmt.Errorf("STORE_DSN: %w", err)
		}
		mc.ParseTime = true
		db, err := sql.Open("mysql", mc.FormatDSN())
		if err != nil {
			return Backend{}, err
		}
		// Grants serialise on one row anyway; more connections than this
		// only queue in the server (MariaDB allows 151 by default).
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
		b, err := mysqlBackend(ctx, db, cfg.SubStreamCost)
		if err != nil {
			_ = db.Close()
		}
		return b, err
	case "postgres":
		pool, err := pgxpool.New(ctx, cfg.DSN)
		if err != nil {
			return Backend{}, fmt.Errorf("STORE_DSN: %w", err)
		}
		b, err := postgresBackend(ctx, pool)
		if err != nil {
			pool.Close()
		}
		return b, err
	case "redis":
		opts, err := redis.ParseURL(cfg.DSN)
		if err != nil {
			return Backend{}, fmt.Errorf("STORE_DSN: %w", err)
		}
		c := redis.NewClient(opts)
		b, err := redisBackend(ctx, c, cfg.RedisPrefix)
		if err != nil {
			_ = c.Close()
		}
		return b, err
	}
	return Backend{History: &memoryHistory{}, Close: func() error { return nil }}, nil
}

// mysqlBackend keeps leases in sqllease's table modal_lease_records and
// shows them as the design's modal_leases (§7.1) through a view; subCost is
// SUB_STREAM_COST, which tells a sub lease from a main one.
func mysqlBackend(ctx context.Context, db *sql.DB, subCost int) (Backend, error) {
	st, err := sqllease.NewMySQL(db, sqllease.Options{Table: mysqlRecordsTable})
	if err != nil {
		return Backend{}, err
	}
	if err := st.Migrate(ctx); err != nil {
		return Backend{}, fmt.Errorf("migrating %s: %w", mysqlRecordsTable, err)
	}
	// The design's modal_leases, column for column. subCost is an int from
	// the validated configuration, so formatting it into the DDL is safe.
	if _, err := db.ExecContext(ctx, fmt.Sprintf(`CREATE OR REPLACE VIEW %s AS SELECT
    CAST(id AS CHAR(36)) AS lease_id,
    CAST(holder AS CHAR(128)) AS user_id,
    CAST(resource AS CHAR(64)) AS camera_id,
    IF(cost = %d, 'sub', 'main') AS quality,
    created_at, expires_at,
    heartbeat_at AS last_heartbeat
FROM %s`, leaseTable, subCost, mysqlRecordsTable)); err != nil {
		return Backend{}, fmt.Errorf("creating the view %s: %w", leaseTable, err)
	}
	// The design's admission_metrics, as written (§7.2).
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+metricsTable+` (
    metric_id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
    recorded_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    active_modals INT UNSIGNED NOT NULL,
    active_suggest TINYINT(1) NOT NULL,
    cpu_percent DECIMAL(5,2) NOT NULL,
    memory_percent DECIMAL(5,2) NOT NULL,
    requests_total INT UNSIGNED NOT NULL,
    rejections_total INT UNSIGNED NOT NULL,
    INDEX idx_metrics_time (recorded_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`); err != nil {
		return Backend{}, fmt.Errorf("creating %s: %w", metricsTable, err)
	}
	seats, err := sqllease.NewMySQL(db, sqllease.Options{Table: seatTable})
	if err != nil {
		return Backend{}, err
	}
	if err := seats.Migrate(ctx); err != nil {
		return Backend{}, fmt.Errorf("migrating %s: %w", seatTable, err)
	}
	return Backend{Leases: st, Seats: seats, History: &sqlHistory{db: mysqlDB{db}}, Close: db.Close}, nil
}

func postgresBackend(ctx context.Context, pool *pgxpool.Pool) (Backend, error) {
	st, err := sqllease.NewPostgres(pool, sqllease.Options{Table: leaseTable})
	if err != nil {
		return Backend{}, err
	}
	if err := st.Migrate(ctx); err != nil {
		return Backend{}, fmt.Errorf("migrating %s: %w", leaseTable, err)
	}
	seats, err := sqllease.NewPostgres(pool, sqllease.Options{Table: seatTable})
	if err != nil {
		return Backend{}, err
	}
	if err := seats.Migrate(ctx); err != nil {
		return Backend{}, fmt.Errorf("migrating %s: %w", seatTable, err)
	}
	// admission_metrics in PostgreSQL's types.
	for _, q := range []string{`CREATE TABLE IF NOT EXISTS ` + metricsTable + ` (
    metric_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
    active_modals INTEGER NOT NULL CHECK (active_modals >= 0),
    active_suggest BOOLEAN NOT NULL,
    cpu_percent NUMERIC(5,2) NOT NULL,
    memory_percent NUMERIC(5,2) NOT NULL,
    requests_total INTEGER NOT NULL CHECK (requests_total >= 0),
    rejections_total INTEGER NOT NULL CHECK (rejections_total >= 0)
)`, `CREATE INDEX IF NOT EXISTS idx_metrics_time ON ` + metricsTable + ` (recorded_at)`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return Backend{}, fmt.Errorf("creating %s: %w", metricsTable, err)
		}
	}
	return Backend{Leases: st, Seats: seats, History: &sqlHistory{db: pgDB{pool}}, Close: func() error { pool.Close(); return nil }}, nil
}

func redisBackend(ctx context.Context, c *redis.Client, prefix string) (Backend, error) {
	if err := c.Ping(ctx).Err(); err != nil {
		return Backend{}, fmt.Errorf("redis: %w", err)
	}
	st, err := redislease.New(c, redislease.Options{Prefix: prefix})
	if err != nil {
		return Backend{}, err
	}
	name := func(n string) string {
		if strings.HasSuffix(prefix, ":") {
			return prefix + n
		}
		return prefix + ":" + n
	}
	// The seats' keys: {cameras:ui_user_seats:}:leases, ... (a prefix with
	// a hash tag keeps it: {cams}:ui_user_seats:leases).
	seats, err := redislease.New(c, redislease.Options{Prefix: name(seatPrefix) + ":"})
	if err != nil {
		return Backend{}, err
	}
	return Backend{Leases: st, Seats: seats, History: &redisHistory{c: c, key: name(metricsTable)}, Close: c.Close}, nil
}

// sqlHistory is admission_metrics in a SQL table, through one of two
// dialects.
type sqlHistory struct{ db sqlDialect }

type sqlDialect interface {
	insert(ctx context.Context, r Row) error
	since(ctx context.Context, t time.Time) ([]Row, error)
	purge(ctx context.Context, before time.Time) (int, error)
}

func (h *sqlHistory) Record(ctx context.Context, r Row) error { return h.db.insert(ctx, r) }
func (h *sqlHistory) Since(ctx context.Context, t time.Time) ([]Row, error) {
	return h.db.since(ctx, t)
}
func (h *sqlHistory) Purge(ctx context.Context, before time.Time) (int, error) {
	return h.db.purge(ctx, before)
}

// mysqlDB writes DATETIME(3) values as UTC text and reads them back as
// text, so neither the DSN's loc nor the session's time_zone matters.
type mysqlDB struct{ db *sql.DB }

const mysqlTime = "2006-01-02 15:04:05.000"

func (m mysqlDB) insert(ctx context.Context, r Row) error {
	_, err := m.db.ExecContext(ctx, `INSERT INTO `+metricsTable+` (recorded_at, active_modals, active_suggest, cpu_percent,
memory_percent, requests_total, rejections_total) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.RecordedAt.UTC().Format(mysqlTime), r.ActiveModals, r.ActiveSuggest, r.CPUPercent, r.MemoryPercent, r.RequestsTotal, r.RejectionsTotal)
	return err
}

func (m mysqlDB) since(ctx context.Context, t time.Time) ([]Row, error) {
	rows, err := m.db.QueryContext(ctx, `SELECT DATE_FORMAT(recorded_at, '%Y-%m-%d %H:%i:%s.%f'), active_modals, active_suggest,
cpu_percent, memory_percent, requests_total, rejections_total FROM `+metricsTable+` WHERE recorded_at >= ? ORDER BY recorded_at, metric_id`,
		t.UTC().Format(mysqlTime))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var at string
		if err := rows.Scan(&at, &r.ActiveModals, &r.ActiveSuggest, &r.CPUPercent, &r.MemoryPercent, &r.RequestsTotal, &r.RejectionsTotal); err != nil {
			return nil, err
		}
		if r.RecordedAt, err = time.Parse("2006-01-02 15:04:05.000000", at); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (m mysqlDB) purge(ctx context.Context, before time.Time) (int, error) {
	res, err := m.db.ExecContext(ctx, `DELETE FROM `+metricsTable+` WHERE recorded_at < ?`, before.UTC().Format(mysqlTime))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

type pgDB struct{ pool *pgxpool.Pool }

func (p pgDB) insert(ctx context.Context, r Row) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO `+metricsTable+` (recorded_at, active_modals, active_suggest, cpu_percent,
memory_percent, requests_total, rejections_total) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		r.RecordedAt, r.ActiveModals, r.ActiveSuggest, r.CPUPercent, r.MemoryPercent, r.RequestsTotal, r.RejectionsTotal)
	return err
}

func (p pgDB) since(ctx context.Context, t time.Time) ([]Row, error) {
	rows, err := p.pool.Query(ctx, `SELECT recorded_at, active_modals, active_suggest, cpu_percent::float8, memory_percent::float8,
requests_total, rejections_total FROM `+metricsTable+` WHERE recorded_at >= $1 ORDER BY recorded_at, metric_id`, t)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.RecordedAt, &r.ActiveModals, &r.ActiveSuggest, &r.CPUPercent, &r.MemoryPercent, &r.RequestsTotal, &r.RejectionsTotal); err != nil {
			return nil, err
		}
		r.RecordedAt = r.RecordedAt.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

func (p pgDB) purge(ctx context.Context, before time.Time) (int, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM `+metricsTable+` WHERE recorded_at < $1`, before)
	return int(tag.RowsAffected()), err
}

// redisHistory is admission_metrics in a sorted set scored by recorded_at
// in milliseconds; each member is a row as JSON with a unique id.
type redisHistory struct {
	c   *redis.Client
	key string
}

type redisRow struct {
	ID string `json:"id"`
	Row
}

func (h *redisHistory) Record(ctx context.Context, r Row) error {
	b, err := json.Marshal(redisRow{ID: crand.Text()[:12], Row: r})
	if err != nil {
		return err
	}
	return h.c.ZAdd(ctx, h.key, redis.Z{Score: float64(r.RecordedAt.UnixMilli()), Member: b}).Err()
}

func (h *redisHistory) Since(ctx context.Context, t time.Time) ([]Row, error) {
	ms, err := h.c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: h.key, ByScore: true, Start: strconv.FormatInt(t.UnixMilli(), 10), Stop: "+inf"}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Row, 0, len(ms))
	for _, m := range ms {
		var r redisRow
		if err := json.Unmarshal([]byte(m), &r); err != nil {
			return nil, errors.Join(fmt.Errorf("%s: bad member", h.key), err)
		}
		r.RecordedAt = r.RecordedAt.UTC()
		out = append(out, r.Row)
	}
	return out, nil
}

func (h *redisHistory) Purge(ctx context.Context, before time.Time) (int, error) {
	n, err := h.c.ZRemRangeByScore(ctx, h.key, "-inf", "("+strconv.FormatInt(before.UnixMilli(), 10)).Result()
	return int(n), err
}
