// Package catalog is the workspaces table as the proxies and the admin API
// write it: the phases and operations of a workspace, and the few writes
// that are not the TTL runner's (last_access_at, desired_state on expiry)
// nor the controller's (phase, phase_changed_at, operation): creating a
// workspace, asking one to run, deleting one.
//
// The table is an entities.Store: in memory, or PostgreSQL's workspaces table
// through pgttl. Every write is a compare-and-set on the row as it was read,
// retried when someone else wrote first, so a proxy never overwrites a
// decision it did not see.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/ttl"
)

// Phases of a workspace: what it is now (the phase column, written by the
// controller) and what it should become (desired_state, written by the
// runner when a TTL expires and by this package when a user asks).
const (
	// Pending is a workspace created but never started.
	Pending = "PENDING"
	// Running is a workspace whose server process runs.
	Running = "RUNNING"
	// Standby is a workspace whose process is stopped; its files are kept
	// as they are.
	Standby = "STANDBY"
	// Archived is a workspace whose files are packed into an archive and
	// removed.
	Archived = "ARCHIVED"
)

// Operations the controller runs; while one is set, no rule fires and no
// other controller acts on the workspace. "" is none ('NONE' in
// PostgreSQL).
const (
	OpStarting  = "STARTING"
	OpStopping  = "STOPPING"
	OpArchiving = "ARCHIVING"
)

// Errors.
var (
	// ErrInvalidID is returned for an id that is not a workspace id.
	ErrInvalidID = errors.New("catalog: invalid workspace id")
	// ErrNotFound is returned for a workspace that does not exist.
	ErrNotFound = errors.New("catalog: no such workspace")
	// ErrDeleted is returned for a workspace that was deleted.
	ErrDeleted = errors.New("catalog: workspace deleted")
	// ErrExists is returned by Create for an id already taken.
	ErrExists = errors.New("catalog: workspace exists")
)

// idRE is what a workspace id looks like: it is a path segment of the
// proxy, a directory name and a process label.
var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// ValidID reports whether id can name a workspace: 1 to 40 lower-case
// letters, digits and '-', not starting with '-'.
func ValidID(id string) bool { return idRE.MatchString(id) }

// Waker tells the controllers that workspaces want attention now, rather
// than at their next full reconcile: in one process a direct call, across
// processes a NOTIFY.
type Waker func(ctx context.Context, ids []string) error

// Catalog is the workspaces table for the proxies and the admin API.
type Catalog struct {
	store entities.Store
	wake  Waker
}

// New returns a Catalog on store that wakes the controllers with wake (nil:
// never; they find the work at their next reconcile).
func New(store entities.Store, wake Waker) *Catalog {
	return &Catalog{store: store, wake: wake}
}

// Store returns the underlying store.
func (c *Catalog) Store() entities.Store { return c.store }

// Create adds a workspace that should run: PENDING with desired state
// RUNNING, its last activity now. It wakes the controllers.
func (c *Catalog) Create(ctx context.Context, id string) (entities.Entity, error) {
	if !ValidID(id) {
		return entities.Entity{}, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	e, err := c.store.Create(ctx, entities.Entity{ID: id, Phase: Pending, DesiredState: Running})
	if errors.Is(err, entities.ErrExists) {
		return entities.Entity{}, fmt.Errorf("%w: %s", ErrExists, id)
	}
	if err != nil {
		return entities.Entity{}, err
	}
	c.notify(ctx, id)
	return e, nil
}

// Get returns the workspace id, deleted or not.
func (c *Catalog) Get(ctx context.Context, id string) (entities.Entity, error) {
	if !ValidID(id) {
		return entities.Entity{}, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	e, err := c.store.Get(ctx, id)
	if errors.Is(err, entities.ErrNotFound) {
		return entities.Entity{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return e, err
}

// List returns up to limit workspaces (not deleted) whose ids sort after
// after.
func (c *Catalog) List(ctx context.Context, after string, limit int) ([]entities.Entity, error) {
	return c.store.List(ctx, entities.Filter{After: after, Limit: limit})
}

// casAttempts bounds the retries of a compare-and-set that others keep
// winning; each retry reads the row again.
const casAttempts = 20

// AskRun asks for the workspace to run: it sets desired_state RUNNING,
// whatever operation is in progress (the controller starts it once that
// ends), and wakes the controllers. A proxy calls it when it finds no
// working route to the workspace, so even a workspace that is RUNNING in
// the table is asked again: its server may have died, which the
// controller checks. The request that asks is activity: it is merged into
// last_access_at at once, so that a workspace woken after a long sleep is
// not judged idle by the next tick, before the proxy's tracker has
// flushed. It returns the workspace as it was left.
func (c *Catalog) AskRun(ctx context.Context, id string) (entities.Entity, error) {
	if !ValidID(id) {
		return entities.Entity{}, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	if err := c.store.Add(ctx, []ttl.Activity{{ID: id, At: time.Now()}}); err != nil {
		return entities.Entity{}, err
	}
	return c.cas(ctx, id, "ask to run", func(e entities.Entity) (entities.Update, bool, error) {
		if !e.DeletedAt.IsZero() {
			return entities.Update{}, false, fmt.Errorf("%w: %s", ErrDeleted, id)
		}
		return entities.Update{DesiredState: Running}, e.DesiredState != Running, nil
	})
}

// Delete soft-deletes the workspace: deleted_at is set, so no rule and no
// proxy touches it again, and desired_state ARCHIVED, so the controller
// stops it and packs its files (kept for an operator to restore).
func (c *Catalog) Delete(ctx context.Context, id string) (entities.Entity, error) {
	return c.cas(ctx, id, "delete", func(entities.Entity) (entities.Update, bool, error) {
		return entities.Update{DesiredState: Archived, Delete: true}, true, nil
	})
}

// cas reads workspace id, asks change for the write to make (if any), and
// writes it with the operation read as the expected one, leaving the
// operation as it is; it reads and asks again when another writer came
// first. Then it wakes the controllers.
func (c *Catalog) cas(ctx context.Context, id, what string, change func(entities.Entity) (entities.Update, bool, error)) (entities.Entity, error) {
	for range casAttempts {
		e, err := c.Get(ctx, id)
		if err != nil {
			return e, err
		}
		u, write, err := change(e)
		if err != nil {
			return e, err
		}
		if write {
			u.ExpectOperation, u.Operation = e.Operation, e.Operation
			if e, err = c.store.Update(ctx, id, u); errors.Is(err, entities.ErrConflict) {
				continue
			}
			if err != nil {
				return e, err
			}
		}
		c.notify(ctx, id)
		return e, nil
	}
	return entities.Entity{}, fmt.Errorf("catalog: %s %s: %w (%d attempts)", what, id, entities.ErrConflict, casAttempts)
}

// notify wakes the controllers; a failed wake is not an error (the full
// reconcile finds the work), the write stands.
func (c *Catalog) notify(ctx context.Context, id string) {
	if c.wake != nil {
		_ = c.wake(ctx, []string{id})
	}
}
