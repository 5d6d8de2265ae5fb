// Package redisrun runs the commands of ttlkit's Redis backends so that they
// behave alike on one server and on a Redis Cluster: it repeats a command
// that the server refused without running it (a slot in migration, a
// cluster without a master for a moment), has a cluster client reload the
// cluster's layout when a node stops answering, and makes a write wait for
// replicas (WAIT) on the connection that sent it.
package redisrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// Wait says how many replicas must acknowledge a write and how long to
// wait for them.
type Wait struct {
	Replicas int
	Timeout  time.Duration
}

// EvalWait runs script on keys and args (EVALSHA, EVAL when the server has
// not cached it), then, unless touch is "", a write of touch (HSET touch w
// 1, a hash of the same slot that the caller keeps anyway), then WAIT for
// w.Replicas replicas, in one pipeline on one connection to the master
// that serves keys[0]. The write makes WAIT cover everything the script
// read, even when the script itself wrote nothing.
// It returns the script's reply and how many replicas acknowledged; an
// error of the script, of the connection or of the server refusing the
// pipeline (MOVED, ASK, TRYAGAIN, ...) comes back as it is, for Do.
func EvalWait(ctx context.Context, c redis.UniversalClient, script *redis.Script, keys []string, args []any,
	touch string, w Wait) (any, int, error) {
	var node *redis.Client
	switch c := c.(type) {
	case *redis.Client:
		node = c
	case *redis.ClusterClient:
		var err error
		if node, err = c.MasterForKey(ctx, keys[0]); err != nil {
			return nil, 0, err
		}
	default:
		return nil, 0, fmt.Errorf("waiting for replicas needs a *redis.Client or *redis.ClusterClient, not %T", c)
	}
	send := func(eval bool) (*redis.Cmd, *redis.Cmd, error) {
		var (
			ev   *redis.Cmd
			wait *redis.Cmd
		)
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			if eval {
				ev = script.Eval(ctx, p, keys, args...)
			} else {
				ev = script.EvalSha(ctx, p, keys, args...)
			}
			if touch != "" {
				p.HSet(ctx, touch, "w", 1)
			}
			wait = p.Do(ctx, "wait", w.Replicas, w.Timeout.Milliseconds())
			return nil
		})
		return ev, wait, err
	}
	ev, wait, err := send(false)
	if ev != nil && redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") {
		ev, wait, err = send(true)
	}
	if ev == nil {
		return nil, 0, err
	}
	if err := ev.Err(); err != nil {
		return nil, 0, err
	}
	n, err := wait.Int()
	if err != nil {
		return ev.Val(), 0, err
	}
	return ev.Val(), n, nil
}

// WaitOptions checks the WaitReplicas and WaitTimeout options of a
// backend (timeout 0 means def) and returns what they ask for, or an
// error that names the bad option. No replicas means no waiting. Waiting
// needs a *redis.Client or *redis.ClusterClient, and a timeout below its
// ReadTimeout (a pipeline waits for its replies that long).
func WaitOptions(c redis.UniversalClient, replicas int, timeout, def time.Duration) (Wait, error) {
	switch {
	case replicas < 0:
		return Wait{}, fmt.Errorf("WaitReplicas (%d) must not be negative", replicas)
	case timeout < 0:
		return Wait{}, fmt.Errorf("WaitTimeout (%v) must not be negative", timeout)
	case replicas == 0:
		return Wait{}, nil
	case timeout == 0:
		timeout = def
	}
	var read time.Duration
	switch c := c.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	default:
		return Wait{}, fmt.Errorf("WaitReplicas (%d) needs a *redis.Client or *redis.ClusterClient, not %T", replicas, c)
	}
	if read > 0 && timeout >= read {
		return Wait{}, fmt.Errorf("WaitTimeout (%v) must be below the client's ReadTimeout (%v)", timeout, read)
	}
	return Wait{Replicas: replicas, Timeout: timeout}, nil
}

// Returned is a bounded list of the nonces of calls that have returned to
// their caller: the receipts (replies kept for a resend of the same call)
// that later calls of the same client may delete, since no resend of a
// returned call can come any more. It is safe for concurrent use.
type Returned struct {
	mu  sync.Mutex
	ids []string
}

// Bounds: how many nonces Take returns at most, and how many a Returned
// keeps (beyond that, the oldest receipts are left to expire).
const (
	ReceiptsPerCall = 32
	maxReturned     = 1024
)

// Take removes and returns up to ReceiptsPerCall nonces, for a call to
// delete their receipts.
func (n *Returned) Take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := min(len(n.ids), ReceiptsPerCall)
	out := slices.Clone(n.ids[len(n.ids)-k:])
	n.ids = n.ids[:len(n.ids)-k]
	return out
}

// Add records the nonces of returned calls (or gives back those of a call
// that may not have deleted their receipts), dropping the oldest beyond
// the bound.
func (n *Returned) Add(ids ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ids = append(n.ids, ids...)
	if over := len(n.ids) - maxReturned; over > 0 {
		n.ids = slices.Delete(n.ids, 0, over)
	}
}
