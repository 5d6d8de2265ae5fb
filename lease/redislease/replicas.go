package redislease

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// replicaCheck is how often, at most, a Store whose writes wait for the
// replicas the master has (Options.WaitReplicas 0) asks the master how
// many it has, unless its master changed or a write went unacknowledged.
const replicaCheck = time.Second

// replicaGone is how long after a master last had a replica online its
// writes still wait for one. A replica cut off from its master may still
// take over from it, with what it had, for a while: Redis Cluster lets one
// whose link has been down less than cluster-node-timeout ×
// cluster-replica-validity-factor + repl-ping-replica-period (160 s by
// default) do so, Sentinel one down less than ten times
// down-after-milliseconds (300 s by default). A write that such a replica
// lacks must not be acknowledged.
const replicaGone = 5 * time.Minute

// replicaCount is what a Store with Options.WaitReplicas 0 knows of its
// master's replicas.
type replicaCount struct {
	mu     sync.Mutex
	node   *redis.Client // the cluster node asked; nil for a client of one server
	seen   time.Time     // when node last had a replica online
	at     time.Time     // when it was asked; zero: ask at the next write
	asking bool
}

// waitable reports whether writes through c can wait for replicas.
func waitable(c redis.UniversalClient) bool {
	switch c.(type) {
	case *redis.Client, *redis.ClusterClient:
		return true
	}
	return false
}

// autoTimeout is the wait timeout when Options.WaitTimeout is 0 and the
// Store waits for the replicas its master has: defaultWaitTimeout, or half
// the client's ReadTimeout when that is not above it (the wait must end
// before the read of its reply gives up).
func autoTimeout(c redis.UniversalClient) time.Duration {
	var read time.Duration
	switch c := c.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	}
	if read > 0 && read <= defaultWaitTimeout {
		return read / 2
	}
	return defaultWaitTimeout
}

// replicas returns how many replicas a write waits for when
// Options.WaitReplicas is 0, and the client to send it through (the master
// of the store's slot, for a cluster). It waits for one if that master has
// had a replica online within replicaGone, else for none. It asks the
// master (INFO replication, one round trip) when it has not for
// replicaCheck, when the slot has another master, or after a write that
// was not acknowledged; meanwhile, and while another call asks the same
// master, it answers from what it knew.
func (s *Store) replicas(ctx context.Context) (int, redis.UniversalClient) {
	var node *redis.Client
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		var err error
		if node, err = cc.MasterForKey(ctx, s.keys[0]); err != nil {
			return s.reps.last(), s.client
		}
	}
	var c redis.UniversalClient = s.client
	if node != nil {
		c = node
	}
	r := &s.reps
	r.mu.Lock()
	if node == r.node && (r.asking || !r.at.IsZero() && time.Since(r.at) < replicaCheck) {
		n := r.count()
		r.mu.Unlock()
		return n, c
	}
	r.asking = true
	r.mu.Unlock()

	online, err := online(ctx, c)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asking = false
	if node != r.node {
		r.seen = time.Time{}
	}
	r.node, r.at = node, time.Now()
	if err == nil && online > 0 {
		r.seen = r.at
	}
	return r.count(), c
}

// count returns 1 if the master had a replica online within replicaGone.
func (r *replicaCount) count() int {
	if !r.seen.IsZero() && time.Since(r.seen) < replicaGone {
		return 1
	}
	return 0
}

// last returns what the Store last knew.
func (r *replicaCount) last() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count()
}

// recheck has the next write ask the master again.
func (r *replicaCount) recheck() {
	r.mu.Lock()
	r.at = time.Time{}
	r.mu.Unlock()
}

// online returns how many replicas the server c talks to reports online.
func online(ctx context.Context, c redis.UniversalClient) (int, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		// slave0:ip=...,port=...,state=online,offset=...,lag=...
		if rest, ok := strings.CutPrefix(line, "slave"); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' &&
			strings.Contains(rest, ",state=online,") {
			n++
		}
	}
	return n, nil
}
