package redislease

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/rediskey"
	"github.com/ttlkit/ttlkit/internal/redisrun"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/storeerr"
)

// Options configure a Store.
type Options struct {
	// Prefix names the store's data in Redis; required. Stores (in any
	// number of processes) with the same Prefix on the same server share
	// leases, budget and fencing tokens.
	//
	// Every key is in one Redis Cluster hash slot: if Prefix contains a
	// hash tag ("{...}" with at least one byte inside) the keys are Prefix +
	// name, else "{" + Prefix + "}:" + name. So "cams" gives
	// {cams}:leases, {cams}:deadlines, ... and "app:{cams}:" gives
	// app:{cams}:leases, ... A Prefix without a hash tag must not contain
	// "}" (it would end the added tag early): New refuses it.
	Prefix string

	// MaxGrace bounds how long any lease of the store can stay live
	// without a heartbeat: Grant refuses, with lease.ErrInvalid, a lease
	// whose Grace and TTL both exceed it. After the store detects that it
	// lost state (see "State loss" in the package documentation) it
	// refuses grants, with lease.ErrRecovering, until every lease
	// granted before has lapsed for its holder: for the store's window,
	// the largest, over the leases granted, of the smaller of TTL and
	// Grace, which MaxGrace bounds. Zero means 45 seconds.
	MaxGrace time.Duration

	// TrustRestarts has no effect: a restart or a failover is a loss only
	// when the store's data is gone or has gone back in time, which the
	// store sees in the data itself (see "State loss" in the package
	// documentation).
	//
	// Deprecated: a restart that keeps every write is no loss without it.
	TrustRestarts bool

	// WaitReplicas is how many replicas of the master must acknowledge
	// every Grant, Heartbeat, Release and Sweep (WAIT, on the connection
	// that sent it) before it returns; a call they do not acknowledge
	// within WaitTimeout fails with ErrNotReplicated and
	// lease.ErrUnknownOutcome. Then a replica that takes over from a
	// master has every write a client was told of, and the failover is no
	// loss (see "Redis Cluster" in the package documentation).
	//
	// 0 means one if the master has had a replica online in the last five
	// minutes (a replica cut off for less may still take over), else
	// none: the Store asks the master (INFO replication) at most once a
	// second, at once when the store's slot has another master, and after
	// a write the replica did not acknowledge. Set it to the number of
	// replicas of each master when there are several, so that whichever
	// takes over has every write; negative means never wait (a failover
	// may then lose acknowledged writes, which the store notices only as
	// far as each Store saw them). Waiting needs a *redis.Client or a
	// *redis.ClusterClient: with another client, 0 means never.
	WaitReplicas int

	// WaitTimeout bounds how long a call waits for the replicas; it must be
	// below the client's ReadTimeout. Zero means 1 second, or half
	// the client's ReadTimeout when that is not above it.
	WaitTimeout time.Duration
}

// defaultWaitTimeout is Options.WaitTimeout when it is 0.
const defaultWaitTimeout = time.Second

// ErrNotReplicated is matched, with lease.ErrUnknownOutcome, by the error
// of a call that the master ran but fewer than Options.WaitReplicas
// replicas acknowledged within Options.WaitTimeout: a failover could still
// lose it. A Grant that fails so may have granted the lease (repeat it
// with the same ID to find out); it lapses after its grace if no one
// heartbeats it.
var ErrNotReplicated = errors.New("redislease: not acknowledged by the replicas")

// defaultMaxGrace is Options.MaxGrace when it is 0: the lease Manager's
// default grace.
const defaultMaxGrace = 45 * time.Second

// Store is a lease.Store on Redis. Each operation is one round trip: a Lua
// script (EVALSHA, falling back to EVAL when the server does not have it
// cached) that reads the time from the server's TIME, retires expired
// leases and makes its decision atomically. So any number of Stores with
// the same Prefix, in any number of processes, act as one store, and
// clients' clocks never matter.
//
// Times are kept in microseconds, as the server's TIME gives them. Fencing
// tokens come from the store's counter, in the same script as the grant,
// never below the server's clock in microseconds, and are never reused.
//
// The work of retiring expired leases (moving them out of the live set and
// the budget) is done once per lease, by whichever script runs first after
// its deadline: O(log n) per lease.
//
// A Store is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	keys   []string // keyNames under the prefix
	// scriptKeys are keys and redisrun.Guard: the KEYS of every script.
	scriptKeys []string
	base       string // the prefix every key name is appended to
	// once: the client sends every command once (no retries), so a failure
	// to connect or a refusal by the server proves nothing was applied.
	once     bool
	maxGrace time.Duration
	// seen is what this Store last saw of the state, from the replies to
	// its acknowledged writes: a state that is missing, of another
	// generation or of a lower version later was lost.
	seen seen
	// wait is Options.WaitReplicas (0 unless positive) and WaitTimeout.
	wait redisrun.Wait
	// auto: Options.WaitReplicas is 0 and the client can wait; writes
	// wait for the replicas the master has (see replicas).
	auto bool
	reps replicaCount
	// returned holds the nonces of Release and Sweep calls that have
	// returned, whose receipts the next such calls delete (see keyNames).
	returned redisrun.Returned
}

// receiptTTL is how long a Release or Sweep keeps its reply for a repeat
// of the same call when no later call of its Store deletes it (see
// keyNames): longer than go-redis's retries of one command take with its
// default timeouts and backoff.
const receiptTTL = time.Minute

var _ lease.Store = (*Store)(nil)

// New returns a Store that keeps its leases in Redis through client, under
// opts.Prefix. It does not contact the server. A nil client or a bad Prefix
// returns an error matching lease.ErrInvalid.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errs.Invalid(lease.ErrInvalid, "redislease: client is nil")
	}
	base, err := rediskey.Base("redislease", opts.Prefix)
	if err != nil {
		return nil, errs.Invalid(lease.ErrInvalid, "%v", err)
	}
	keys := make([]string, len(keyNames))
	for i, n := range keyNames {
		keys[i] = base + n
	}
	if opts.MaxGrace < 0 {
		return nil, errs.Invalid(lease.ErrInvalid, "redislease: MaxGrace (%v) must not be negative", opts.MaxGrace)
	}
	if opts.MaxGrace == 0 {
		opts.MaxGrace = defaultMaxGrace
	}
	var wait redisrun.Wait
	auto := opts.WaitReplicas == 0 && waitable(client)
	switch {
	case opts.WaitReplicas > 0:
		wait, err = redisrun.WaitOptions(client, opts.WaitReplicas, opts.WaitTimeout, defaultWaitTimeout)
	case auto:
		wait, err = redisrun.WaitOptions(client, 1, opts.WaitTimeout, autoTimeout(client))
		wait.Replicas = 0
	default:
		wait, err = redisrun.WaitOptions(client, 0, opts.WaitTimeout, defaultWaitTimeout)
	}
	if err != nil {
		return nil, errs.Invalid(lease.ErrInvalid, "redislease: %v", err)
	}
	s := &Store{client: client, keys: keys, scriptKeys: append(slices.Clip(keys), base+redisrun.Guard), base: base, once: noRetries(client),
		maxGrace: opts.MaxGrace, wait: wait, auto: auto}
	return s, nil
}

// noRetries reports whether client sends each command at most once. Only
// then can a failed call be known not to have been applied: with retries,
// an attempt whose reply was lost may have taken effect before the attempt
// whose error the client returns.
func noRetries(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().MaxRetries == 0
	case *redis.ClusterClient:
		// Its node clients never retry; it sends a command once more per
		// redirection or failure, up to MaxRedirects.
		return c.Options().MaxRedirects == 0
	}
	return false
}

// refusals are the prefixes of server errors that refuse a script before it
// runs (or, OOM, before its first write): nothing was applied.
var refusals = []string{"LOADING ", "BUSY ", "READONLY ", "MASTERDOWN ", "MISCONF ", "NOREPLICAS ",
	"NOPERM ", "NOSCRIPT ", "CROSSSLOT ", "MOVED ", "ASK ", "CLUSTERDOWN ", "TRYAGAIN ", "OOM "}

// classify marks a failed call (err from go-redis, wrapped as wrapped) as
// lease.ErrNotApplied when nothing can have reached the server or the
// server refused it, and the client did not retry; else as
// lease.ErrUnknownOutcome.
func (s *Store) classify(err, wrapped error) error {
	if s.once && notSent(err) {
		return storeerr.NotApplied(wrapped)
	}
	return storeerr.UnknownOutcome(wrapped)
}

// notSent reports whether err proves that one attempt of a command had no
// effect: no connection was made, or the server refused the command.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range refusals {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
	}
	return false
}

// Keys returns the names of the Redis keys the store uses, all of them:
// every key is in one hash slot, and the store creates no others. (Its
// scripts also declare one more, the prefix then "guard", which is never
// written: see "Redis Cluster" in the package documentation.) Deleting
// them deletes every lease; a running Store then treats the store as lost
// (see "State loss" in the package documentation).
func (s *Store) Keys() []string { return slices.Clone(s.keys) }

// run runs a script that only reads (and retires expired leases, which any
// later script would do as well) and checks its status: the first element
// of the reply. A refusal by a cluster (TRYAGAIN while the store's slot
// migrates, CLUSTERDOWN while a replica takes over) is sent again, as
// redisrun.Do does.
func (s *Store) run(ctx context.Context, op string, script *redis.Script, args ...any) ([]any, error) {
	return s.call(ctx, op, false, script, args)
}

// write is run for a script that changes the store: it also waits for
// the replicas (see Options.WaitReplicas).
func (s *Store) write(ctx context.Context, op string, script *redis.Script, args ...any) ([]any, error) {
	return s.call(ctx, op, true, script, args)
}

func (s *Store) call(ctx context.Context, op string, write bool, script *redis.Script, args []any) ([]any, error) {
	if err := errs.Canceled(ctx, "redislease", op); err != nil {
		return nil, storeerr.NotApplied(err)
	}
	type reply struct {
		v     any
		acked int
	}
	w := s.wait
	r, err := redisrun.Do(ctx, s.client, func() (reply, error) {
		// Decided at every attempt: a refused one may go to another
		// master (a failover, a migration). With a cluster, the master
		// whose replicas were counted is the one the write goes to.
		c := s.client
		switch {
		case !write:
			w.Replicas = 0
		case s.auto:
			w.Replicas, c = s.replicas(ctx)
		}
		if w.Replicas == 0 {
			v, err := script.Run(ctx, s.client, s.scriptKeys, args...).Result()
			return reply{v: v}, err
		}
		v, n, err := redisrun.EvalWait(ctx, c, script, s.scriptKeys, args, s.keys[stateKey], w)
		return reply{v, n}, err
	})
	if w.Replicas > 0 && (err != nil || r.acked < w.Replicas) {
		s.reps.recheck()
	}
	switch {
	case err != nil && r.v != nil:
		// The script ran; waiting for the replicas failed.
		return nil, storeerr.UnknownOutcome(errs.Wrap(ctx, "redislease", op, err))
	case err != nil:
		return nil, s.classify(err, errs.Wrap(ctx, "redislease", op, err))
	case r.acked < w.Replicas:
		return nil, storeerr.UnknownOutcome(fmt.Errorf("redislease: %s: %w: %d of %d within %v",
			op, ErrNotReplicated, r.acked, w.Replicas, w.Timeout))
	}
	v, _ := r.v.([]any)
	if len(v) == 0 {
		return nil, storeerr.UnknownOutcome(fmt.Errorf("redislease: %s: unexpected reply %v", op, r.v))
	}
	return v, nil
}

// stateKey is the index of the state hash in keyNames.
const stateKey = 4

// one interprets the reply of a script about one lease. The reply of a
// write ('OK', record, generation, version) tells the Store what it saw.
func (s *Store) one(op, id string, v []any) (lease.Lease, error) {
	switch v[0] {
	case "OK":
		if len(v) == 4 {
			s.seen.saw(v[2], v[3], nil)
			v = v[:2]
		}
		if len(v) == 2 {
			l, err := parse(id, v[1])
			return l, storeerr.UnknownOutcome(err)
		}
	case "NOTFOUND":
		return lease.Lease{}, fmt.Errorf("%w: %s", lease.ErrNotFound, id)
	case "EXPIRED":
		return lease.Lease{}, fmt.Errorf("%w: %s", lease.ErrExpired, id)
	case "RELEASED":
		return lease.Lease{}, fmt.Errorf("%w: %s (%w)", lease.ErrNotFound, id, lease.ErrReleased)
	case "WRONGHOLDER":
		return lease.Lease{}, fmt.Errorf("%w: %s", lease.ErrWrongHolder, id)
	}
	return lease.Lease{}, storeerr.UnknownOutcome(fmt.Errorf("redislease: %s: unexpected reply %v", op, v))
}

// Grant implements lease.Store.
func (s *Store) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	if err := a.Validate(); err != nil {
		return lease.Lease{}, err
	}
	if a.TTL > s.maxGrace && a.Grace > s.maxGrace {
		return lease.Lease{}, errs.Invalid(lease.ErrInvalid,
			"redislease: Grace (%v) and TTL (%v) both exceed Options.MaxGrace (%v)", a.Grace, a.TTL, s.maxGrace)
	}
	gen, ver, win := s.seen.get()
	win = max(win, min(micros(a.TTL), micros(a.Grace)))
	args := make([]any, 0, 11+len(a.Costs))
	args = append(args, a.ID, a.Holder, a.Resource, a.Budget, flag(a.OnePerHolder), flag(a.Overloaded),
		micros(a.TTL), int64(a.Grace), gen, ver, win)
	for _, c := range a.Costs {
		args = append(args, c)
	}
	v, err := s.write(ctx, "grant", grantScript, args...)
	if err != nil {
		return lease.Lease{}, err
	}
	switch v[0] {
	case "REJ":
		if len(v) == 8 {
			s.seen.saw(v[5], v[6], v[7])
		}
		return lease.Lease{}, rejection(v)
	case "DUP":
		return lease.Lease{}, errs.Invalid(lease.ErrInvalid, "redislease: ID %s is another holder's lease", a.ID)
	case "OK":
		if len(v) == 5 {
			s.seen.saw(v[2], v[3], v[4])
			v = v[:2]
		}
	}
	return s.one("grant", a.ID, v)
}

// maxMicros caps TTLs (about 150 years) so that deadlines stay below 2^53
// µs, which Lua's numbers hold exactly.
const maxMicros = 5_000_000_000_000_000

// micros returns d in whole microseconds, rounded up (a positive duration
// stays positive) and capped at maxMicros.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return min(us, maxMicros)
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rejections are the conditions of the reasons in a REJ reply.
var rejections = map[string]error{
	"recovering":       lease.ErrRecovering,
	"overloaded":       lease.ErrOverloaded,
	"holder_has_lease": lease.ErrHolderHasLease,
	"over_capacity":    lease.ErrOverCapacity,
}

// rejection turns a REJ reply (reason, available, existing id, retry after
// in µs) into a *lease.RejectedError.
func rejection(v []any) error {
	re := &lease.RejectedError{}
	if len(v) >= 3 {
		reason, _ := v[1].(string)
		avail, _ := v[2].(int64)
		re.Err, re.Available = rejections[reason], int(avail)
		if re.Err == nil {
			re.Err = fmt.Errorf("redislease: rejected: %s", reason)
		}
	}
	if len(v) >= 4 {
		re.Existing, _ = v[3].(string)
	}
	if len(v) >= 5 {
		us, _ := v[4].(int64)
		re.RetryAfter = time.Duration(us) * time.Microsecond
	}
	return re
}

// Heartbeat implements lease.Store.
func (s *Store) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	v, err := s.write(ctx, "heartbeat", heartbeatScript, id, holder)
	if err != nil {
		return lease.Lease{}, err
	}
	return s.one("heartbeat", id, v)
}

// Release implements lease.Store.
//
// A Release whose reply was lost to a broken connection and that go-redis
// repeats (it retries on network errors) returns the released lease: the
// first attempt left a receipt that the repeat finds. A later, separate
// Release of the same id reports ErrNotFound.
func (s *Store) Release(ctx context.Context, id, holder string) (lease.Lease, error) {
	v, err := s.receipted(ctx, "release", releaseScript, id, holder)
	if err != nil {
		return lease.Lease{}, err
	}
	return s.one("release", id, v)
}

// receipted runs a Release or Sweep script (ARGV: the two arguments, then
// a fresh nonce, receiptTTL in µs and the nonces of returned calls whose
// receipts can go). Once the call has returned, its own nonce joins them;
// those it carried rejoin them unless the call certainly ran.
func (s *Store) receipted(ctx context.Context, op string, script *redis.Script, a, b any) ([]any, error) {
	nonce := crand.Text()
	gone := s.returned.Take()
	args := make([]any, 0, 4+len(gone))
	args = append(args, a, b, nonce, receiptTTL.Microseconds())
	for _, n := range gone {
		args = append(args, n)
	}
	v, err := s.write(ctx, op, script, args...)
	if err != nil {
		s.returned.Add(gone...)
	}
	s.returned.Add(nonce)
	return v, err
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, id string) (lease.Lease, error) {
	v, err := s.run(ctx, "get", getScript, id)
	if err != nil {
		return lease.Lease{}, err
	}
	return s.one("get", id, v)
}

// List implements lease.Store.
func (s *Store) List(ctx context.Context) ([]lease.Lease, error) {
	v, err := s.run(ctx, "list", listScript)
	if err != nil {
		return nil, err
	}
	ls, err := pairs("list", v)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ls, func(a, b lease.Lease) int {
		switch {
		case a.Token < b.Token:
			return -1
		case a.Token > b.Token:
			return 1
		}
		return 0
	})
	return ls, nil
}

// Usage implements lease.Store.
func (s *Store) Usage(ctx context.Context) (units, leases int, err error) {
	v, err := s.run(ctx, "usage", usageScript)
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 3 || v[0] != "OK" {
		return 0, 0, storeerr.NotApplied(fmt.Errorf("redislease: usage: unexpected reply %v", v))
	}
	u, _ := v[1].(int64)
	n, _ := v[2].(int64)
	return int(u), int(n), nil
}

// Sweep implements lease.Store. It removes expired records oldest deadline
// first. A batch whose reply was lost to a broken connection is returned to
// go-redis's repeat of the call (the first attempt left a receipt). Only
// when every attempt of a call fails (or MaxRetries is -1) is a batch that
// was removed reported by no Sweep call: expired events are then lost.
func (s *Store) Sweep(ctx context.Context, limit int) ([]lease.Lease, error) {
	if limit <= 0 {
		return nil, errs.Invalid(lease.ErrInvalid, "redislease: sweep limit (%d) must be > 0", limit)
	}
	v, err := s.receipted(ctx, "sweep", sweepScript, limit, storeerr.ReleasedRetention.Microseconds())
	if err != nil {
		return nil, err
	}
	return pairs("sweep", v)
}

// pairs parses an 'OK', id, record, id, record ... reply.
func pairs(op string, v []any) ([]lease.Lease, error) {
	if v[0] != "OK" || len(v)%2 != 1 {
		return nil, storeerr.UnknownOutcome(fmt.Errorf("redislease: %s: unexpected reply of %d elements", op, len(v)))
	}
	if len(v) == 1 {
		return nil, nil
	}
	out := make([]lease.Lease, 0, len(v)/2)
	for i := 1; i < len(v); i += 2 {
		id, _ := v[i].(string)
		l, err := parse(id, v[i+1])
		if err != nil {
			return nil, storeerr.UnknownOutcome(fmt.Errorf("redislease: %s: %w", op, err))
		}
		out = append(out, l)
	}
	return out, nil
}

// errRecord reports a record the store cannot read; it never matches the
// lease sentinels.
var errRecord = errors.New("redislease: malformed record")

// parse decodes a record (see prelude) of lease id.
func parse(id string, v any) (lease.Lease, error) {
	rec, ok := v.(string)
	if !ok {
		return lease.Lease{}, fmt.Errorf("%w: %T for %s", errRecord, v, id)
	}
	var n [7]int64
	rest := rec
	for i := range n {
		j := strings.IndexByte(rest, ',')
		if j < 0 {
			return lease.Lease{}, fmt.Errorf("%w: %q", errRecord, rec)
		}
		x, err := strconv.ParseInt(rest[:j], 10, 64)
		if err != nil {
			return lease.Lease{}, fmt.Errorf("%w: %q", errRecord, rec)
		}
		n[i], rest = x, rest[j+1:]
	}
	hl := n[6]
	if hl < 0 || hl > int64(len(rest)) {
		return lease.Lease{}, fmt.Errorf("%w: %q", errRecord, rec)
	}
	return lease.Lease{
		ID:          id,
		Holder:      rest[:hl],
		Resource:    rest[hl:],
		Cost:        int(n[1]),
		Token:       uint64(n[0]),
		CreatedAt:   time.UnixMicro(n[2]),
		ExpiresAt:   time.UnixMicro(n[3]),
		HeartbeatAt: time.UnixMicro(n[4]),
		Grace:       time.Duration(n[5]),
	}, nil
}
