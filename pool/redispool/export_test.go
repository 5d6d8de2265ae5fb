package redispool

import (
	"context"
	"time"
)

// PopAs and PutAs run Pop and Put with a chosen replay marker, as go-redis
// does when it resends a call whose reply was lost.
func PopAs(ctx context.Context, inv *Inventory, op, owner string, ttl time.Duration) (any, error) {
	return inv.run(ctx, "pop", popScript, inv.opBase+op, owner, ceilMillis(ttl))
}

func PutAs(ctx context.Context, inv *Inventory, op, id, owner string, maxIdle int) (any, error) {
	return inv.run(ctx, "put", putScript, inv.opBase+op, id, owner, "{}", "", maxIdle, 0)
}
