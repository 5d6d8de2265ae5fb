package sqllease

import (
	"context"

	"github.com/ttlkit/ttlkit/lease"
)

// Store is a lease.Store in a SQL database: PostgreSQL (NewPostgres) or
// MySQL and MariaDB (NewMySQL). It is safe for concurrent use, and any
// number of Stores on the same tables, in any number of processes, act as
// one store.
type Store struct {
	d dialect
}

var _ lease.Store = (*Store)(nil)

// dialect is a Store in one database engine.
type dialect interface {
	lease.Store
	Migrate(ctx context.Context) error
}

// Migrate creates the lease table with its indexes, the state table, the
// table of recent releases (Table + "_released") and the store's state row
// if they do not exist, and brings tables of an earlier version up to date:
// it adds the counter of units to the state table and counts the units of
// the live leases into it (see "The counter" in the package
// documentation), and on MySQL turns the text columns of a lease table
// created with the PAD SPACE collation utf8mb4_bin (under which "alice "
// equals "alice") into VARBINARY. It is idempotent and safe to run from
// several instances at once. Run it after every upgrade of this package: a
// store whose tables lack what this version uses fails with ErrNotMigrated.
func (s *Store) Migrate(ctx context.Context) error { return s.d.Migrate(ctx) }

// Grant implements lease.Store.
func (s *Store) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	return s.d.Grant(ctx, a)
}

// Heartbeat implements lease.Store.
func (s *Store) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	return s.d.Heartbeat(ctx, id, holder)
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, id, holder string) (lease.Lease, error) {
	return s.d.Release(ctx, id, holder)
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, id string) (lease.Lease, error) { return s.d.Get(ctx, id) }

// List implements lease.Store.
func (s *Store) List(ctx context.Context) ([]lease.Lease, error) { return s.d.List(ctx) }

// Usage implements lease.Store.
func (s *Store) Usage(ctx context.Context) (units, leases int, err error) { return s.d.Usage(ctx) }

// Sweep implements lease.Store.
func (s *Store) Sweep(ctx context.Context, limit int) ([]lease.Lease, error) {
	return s.d.Sweep(ctx, limit)
}
