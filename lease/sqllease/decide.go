package sqllease

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/storeerr"
)

// validText checks Holder and Resource of a for what the stores refuse,
// each with its own error naming the field: a NUL byte and invalid UTF-8
// (PostgreSQL text holds neither; MySQL's binary columns could, but both
// dialects accept the same values), and more than limit bytes (0: no
// limit). IDs come from the Manager and are not checked here.
func validText(a lease.GrantArgs, limit int, dialect string) error {
	for _, f := range []struct{ name, v string }{{"Holder", a.Holder}, {"Resource", a.Resource}} {
		switch {
		case strings.IndexByte(f.v, 0) >= 0:
			return errs.Invalid(lease.ErrInvalid, "sqllease: %s (%.40q) contains a NUL byte, which the SQL stores do not accept", f.name, f.v)
		case !utf8.ValidString(f.v):
			return errs.Invalid(lease.ErrInvalid, "sqllease: %s (%.40q) is not valid UTF-8", f.name, f.v)
		case limit > 0 && len(f.v) > limit:
			return errs.Invalid(lease.ErrInvalid, "sqllease: %s is %d bytes, longer than the %d bytes %s keeps", f.name, len(f.v), limit, dialect)
		}
	}
	return nil
}

// decide applies the grant rule of lease.Store to what the transaction read
// at now: used units of live leases and the id of the holder's live lease
// ("" if none). It returns the cost to grant, or the rejection.
// errRepeat marks a Grant whose ID the table already holds for the same
// holder: a repeat of a grant that took effect, answered with the stored
// lease (see lease.Store.Grant). It never leaves the package.
var errRepeat = errors.New("sqllease: repeated grant")

// repeated tells, from the holder stored under a.ID ("" if no row), whether
// the grant is a repeat; the ID stored for another holder is lease.ErrInvalid.
func repeated(a lease.GrantArgs, stored string) (bool, error) {
	switch stored {
	case "":
		return false, nil
	case a.Holder:
		return true, nil
	}
	return false, errs.Invalid(lease.ErrInvalid, "sqllease: ID %s is another holder's lease", a.ID)
}

func decide(a lease.GrantArgs, used int, existing string) (int, error) {
	available := max(a.Budget-used, 0)
	switch {
	case a.Overloaded:
		return 0, &lease.RejectedError{Err: lease.ErrOverloaded, Available: available}
	case a.OnePerHolder && existing != "":
		return 0, &lease.RejectedError{Err: lease.ErrHolderHasLease, Available: available, Existing: existing}
	}
	for _, c := range a.Costs {
		if c <= available {
			return c, nil
		}
	}
	return 0, &lease.RejectedError{Err: lease.ErrOverCapacity, Available: available}
}

// newLease builds the lease granted at now (database time, microseconds),
// with times rounded to the microseconds the database keeps.
func newLease(a lease.GrantArgs, cost int, token uint64, now time.Time) lease.Lease {
	now = now.UTC().Truncate(time.Microsecond)
	return lease.Lease{
		ID: a.ID, Holder: a.Holder, Resource: a.Resource, Cost: cost, Token: token,
		CreatedAt: now, ExpiresAt: now.Add(a.TTL).Truncate(time.Microsecond), HeartbeatAt: now,
		Grace: a.Grace,
	}
}

// deadline is the stored deadline of l: the earlier of ExpiresAt and
// HeartbeatAt + Grace, with the grace rounded up to whole microseconds so
// that "deadline > now" (now in microseconds) is exactly now.Before(l.Deadline()).
func deadline(l lease.Lease) time.Time {
	hb := l.HeartbeatAt.Add(graceMicros(l.Grace) * time.Microsecond)
	if hb.Before(l.ExpiresAt) {
		return hb
	}
	return l.ExpiresAt
}

// graceMicros is g in microseconds, rounded up.
func graceMicros(g time.Duration) time.Duration {
	return (g + time.Microsecond - 1) / time.Microsecond
}

// wrap wraps a database error of operation op of dialect with errs.Wrap
// ("sqllease: postgres: grant: ..."), marking a missing table or state row
// with ErrNotMigrated.
func wrap(ctx context.Context, dialect, op string, err error) error {
	if missingTable(err) {
		err = fmt.Errorf("%w: %w", ErrNotMigrated, err)
	}
	return errs.Wrap(ctx, "sqllease", dialect+": "+op, err)
}

// checkCtx returns a wrapped context.Cause(ctx), matching
// lease.ErrNotApplied, if ctx has already ended, so that a call with a dead
// context sends nothing.
func checkCtx(ctx context.Context, dialect, op string) error {
	return storeerr.NotApplied(errs.Canceled(ctx, "sqllease", dialect+": "+op))
}

// afterCommit classifies wrapped, the wrapped form of err, an error of a
// call that sent COMMIT (or ran a statement in autocommit): the server
// reported that the statement failed, which rolls the whole transaction
// back, or nothing was sent (lease.ErrNotApplied); else the commit may have
// happened (lease.ErrUnknownOutcome). A connection the server ends (a
// FATAL error, a killed MySQL connection) may end it after the commit.
func afterCommit(wrapped, err error) error {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe):
		if pe.Severity == "ERROR" {
			return storeerr.NotApplied(wrapped)
		}
	case errors.As(err, &me):
		switch me.Number {
		case 1053, 1317, 1927: // server shutdown, query interrupted, connection killed
		default:
			return storeerr.NotApplied(wrapped)
		}
	case pgconn.SafeToRetry(err), errors.Is(err, driver.ErrBadConn):
		return storeerr.NotApplied(wrapped)
	}
	return storeerr.UnknownOutcome(wrapped)
}

// storable reports whether s could be a stored id: valid UTF-8 without NUL
// bytes, at most limit bytes (0: no limit). A call on an id that is not
// storable finds nothing without asking the database.
func storable(s string, limit int) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && (limit == 0 || len(s) <= limit)
}

var (
	// ErrNotMigrated is wrapped by the error of an operation on a store
	// whose tables or state row do not exist: Migrate has not run on this
	// database.
	ErrNotMigrated = errors.New("sqllease: not migrated: run Migrate")
)

// missingTable reports whether err is the server's "no such table".
func missingTable(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	return errors.As(err, &pe) && pe.Code == "42P01" || errors.As(err, &me) && me.Number == 1146
}

// notFoundOrExpired returns the error for a call on id that found no live
// row: ErrExpired if the record is present, ErrNotFound if not.
func notFoundOrExpired(present bool, id string) error {
	if present {
		return fmt.Errorf("%w: %s", lease.ErrExpired, id)
	}
	return fmt.Errorf("%w: %s", lease.ErrNotFound, id)
}

// notFound returns ErrNotFound for id, with ErrReleased if the store
// remembers releasing it.
func notFound(id string, released bool) error {
	if released {
		return fmt.Errorf("%w: %s (%w)", lease.ErrNotFound, id, lease.ErrReleased)
	}
	return fmt.Errorf("%w: %s", lease.ErrNotFound, id)
}
