package redisttl

import (
	"context"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/redisrun"
)

// SetBeforeExec makes b's Remove call f between reading the scores and the
// EXEC that deletes the unchanged members.
func SetBeforeExec(b *Buffer, f func()) { b.beforeExec = f }

// Key returns the name of b's sorted set.
func (b *Buffer) Key() string { return b.key }

// Len returns the number of buffered ids (ZCOUNT above -inf, so not the
// generation member).
func (b *Buffer) Len(ctx context.Context) (int, error) {
	n, err := redisrun.Do(ctx, b.client, func() (int64, error) { return b.client.ZCount(ctx, b.key, "(-inf", "+inf").Result() })
	if err != nil {
		return 0, errs.Wrap(ctx, "redisttl", "len", err)
	}
	return int(n), nil
}

// Score and ScoreTime convert between times and the set's scores.
var (
	Score     = score
	ScoreTime = scoreTime
)
