package redisentities

// The Redis helpers of the ttlkit backends: one slot per store, and
// commands sent again while a Redis Cluster refuses them.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Guard is the name, under a store's prefix, of a key that every script
// declares last and that is never written. While the store's slot migrates
// from one master to another the key exists on neither, so the cluster
// refuses every script of the store (TRYAGAIN) until the migration is over,
// and Do repeats it. Without it, a script could run on the old master while
// its keys are all still there, delete a key by removing its last member,
// and then fail at the next command on that key: a key a migrating slot
// does not hold is not local, and a script cannot follow a redirection.
const Guard = "guard"

// RetryFor bounds how long Do repeats a refused command, from its first
// refusal: longer than a slot migration of a small slot and the moment a
// cluster answers CLUSTERDOWN while a replica takes over from a master
// that failed (cluster-node-timeout plus the election).
const RetryFor = 5 * time.Second

// Pauses between two attempts of a refused command: the first, and the
// most they grow to by doubling.
const (
	firstPause = 2 * time.Millisecond
	maxPause   = 100 * time.Millisecond
)

// refusals are the prefixes of the server errors that refuse a command
// before it runs and that a later attempt may not get: TRYAGAIN (a
// command on several keys of a slot whose keys are being migrated, some
// moved and some not), ASK and MOVED (a redirection go-redis did not follow
// to the end), CLUSTERDOWN (the slot has no master for a moment), LOADING
// (a server that restarts) and READONLY (a write to a replica that was a
// master a moment ago).
var refusals = []string{"TRYAGAIN ", "ASK ", "MOVED ", "CLUSTERDOWN ", "LOADING ", "READONLY "}

// Refused reports whether err is a refusal by the server of a command that
// it did not run and that is worth sending again after a pause.
func Refused(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range refusals {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Broken reports whether err may have left the outcome of a command
// unknown because of the connection: an error that is neither a reply from
// the server nor the end of the caller's context.
func Broken(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re redis.Error
	return !errors.As(err, &re)
}

// reloader is a cluster client: it can reload the cluster's layout.
type reloader interface{ ReloadState(ctx context.Context) }

// Reload has a cluster client reload the layout of the cluster (which
// master serves which slots) in the background; other clients ignore it.
// go-redis reloads it by itself after a redirection, but not when a master
// stops answering: then only its periodic reload (a minute by default)
// would find the replica that took over.
func Reload(ctx context.Context, c redis.UniversalClient) {
	if r, ok := c.(reloader); ok {
		r.ReloadState(ctx)
	}
}

// Do runs call and returns its result, after sending it again while the
// server refuses it (Refused), with a pause of 2 ms that doubles up to
// 100 ms, until RetryFor has passed since the first refusal or ctx ends. A
// refused or broken call also has a cluster client reload the cluster's
// layout. Do never repeats a call that may have run.
func Do[T any](ctx context.Context, c redis.UniversalClient, call func() (T, error)) (T, error) {
	v, err := call()
	var deadline time.Time
	pause := firstPause
	for err != nil {
		refused := Refused(err)
		if refused || Broken(err) {
			Reload(ctx, c)
		}
		if !refused {
			break
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(RetryFor)
		}
		if time.Now().Add(pause).After(deadline) || !Sleep(ctx, pause) {
			break
		}
		pause = min(2*pause, maxPause)
		v, err = call()
	}
	return v, err
}

// Sleep waits for d and reports true, or false at once when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// tag returns the hash tag Redis Cluster hashes key by, and whether key has
// one: the bytes between the first "{" and the first "}" after it, when
// there is at least one byte between them (Redis's keyHashSlot).
func tag(key string) (string, bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "", false
	}
	return key[i+1 : i+1+j], true
}

// keyBase returns the base every key of a store starts with. A prefix that
// carries a hash tag is used as it is ("app:{leases}:"); any other becomes
// "{" + prefix + "}:". It returns an error naming the prefix when the keys
// would not share one slot: an empty prefix, or one whose "}" would close
// the added tag early (a prefix starting with "}" gives "{}...", an empty
// tag).
func keyBase(pkg, prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("%s: Prefix is empty", pkg)
	}
	if _, ok := tag(prefix); ok {
		return prefix, nil
	}
	base := "{" + prefix + "}:"
	if tag, ok := tag(base); !ok || tag != prefix {
		return "", fmt.Errorf("%s: Prefix %q: its keys would not share one Redis Cluster hash slot "+
			"(a \"}\" ends the hash tag early); use a prefix without \"}\" or one with a hash tag such as \"{name}\"", pkg, prefix)
	}
	return base, nil
}
