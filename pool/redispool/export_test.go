package redispool

import (
	"context"
	"time"
)

// PopAs and PutAs run Pop and Put with a chosen nonce, as go-redis does
// when it resends a call whose reply was lost (the same command, so
// without the bookkeeping of a new call).
func PopAs(ctx context.Context, inv *Inventory, op, owner string, ttl time.Duration) (any, error) {
	return inv.send(ctx, "pop", true, popScript, []any{"", op, inv.window, owner, ceilMillis(ttl)})
}

func PutAs(ctx context.Context, inv *Inventory, op, id, owner string, maxIdle int) (any, error) {
	return inv.send(ctx, "put", true, putScript, []any{"", op, inv.window, id, owner, "{}", "", maxIdle, 0})
}

// DefaultWaitTimeout is Options.WaitTimeout when it is zero.
const DefaultWaitTimeout = defaultWaitTimeout
