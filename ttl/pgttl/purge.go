package pgttl

import (
	"context"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/entitycheck"
)

var _ ttl.Purger = (*Store)(nil)

// Purge removes the deleted entities among ids in one DELETE ... WHERE id
// = ANY($1) AND deleted_at IS NOT NULL; see ttl.Purger.
func (s *Store) Purge(ctx context.Context, ids []string) (int, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if entitycheck.Storable(id) { // others cannot be stored, so are unknown
			valid = append(valid, id)
		}
	}
	if len(valid) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE id = ANY($1) AND deleted_at IS NOT NULL`, valid)
	if err != nil {
		return 0, errs.Wrap(ctx, "pgttl", "purge", err)
	}
	return int(tag.RowsAffected()), nil
}
