package redistest

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// NamedClient returns a client of its own to r's server whose connections
// carry a CLIENT SETNAME unique to the test (the prefix plus suffix), so that
// KillClients can cut exactly its connections and no one else's. maxRetries
// is go-redis's Options.MaxRetries (-1 disables retries). The client is
// closed when the test ends.
func (r *Redis) NamedClient(t testing.TB, suffix string, maxRetries int) (*redis.Client, string) {
	t.Helper()
	o := *r.opts
	o.ClientName = strings.TrimSuffix(r.Prefix, ":") + "-" + suffix
	o.MaxRetries = maxRetries
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c, o.ClientName
}

// KillClients kills the server connections named name (by NamedClient), and
// no others, and returns how many it killed.
func (r *Redis) KillClients(ctx context.Context, name string) (int, error) {
	list, err := r.Client.ClientList(ctx).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.SplitSeq(list, "\n") {
		var id, nm string
		for f := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			} else if v, ok := strings.CutPrefix(f, "name="); ok {
				nm = v
			}
		}
		if id == "" || nm != name {
			continue
		}
		if err := r.Client.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err == nil {
			n++
		}
	}
	return n, nil
}
