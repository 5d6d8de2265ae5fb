package redisentities

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/examples/entities"
)

// purgeScript removes the entities of ARGV that are deleted (their index
// entries went when they were deleted) and returns how many.
var purgeScript = redis.NewScript(storeLib + `
local n = 0
for i = 1, #ARGV do
  local js = redis.call('HGET', ENT, ARGV[i])
  if js and cjson.decode(js).x ~= '' then
    redis.call('HDEL', ENT, ARGV[i])
    redis.call('ZREM', IDS, ARGV[i])
    n = n + 1
  end
end
return n
`)

// Purge removes the deleted entities among ids, in one script per 1,000
// ids; see entities.Store.Purge.
func (s *Store) Purge(ctx context.Context, ids []string) (int, error) {
	total := 0
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), mergeChunk)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		n, err := Do(ctx, s.client, func() (int, error) {
			return purgeScript.Run(ctx, s.client, s.keys, args...).Int()
		})
		if err != nil {
			return total, entities.Wrap(ctx, "redisentities", "purge", err)
		}
		total += n
	}
	return total, nil
}
