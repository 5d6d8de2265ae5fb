package redispool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/rediskey"
	"github.com/ttlkit/ttlkit/internal/redisrun"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// Defaults of the Options fields left zero.
const (
	defaultReplayWindow = time.Minute
	defaultResends      = 3
	defaultWaitTimeout  = time.Second
)

// ErrInvalid is matched by the errors for bad Options (a nil client, an
// empty Prefix or one whose keys would not share one hash slot) and bad
// arguments (an empty ID or owner, a negative ttl); the call changes
// nothing.
var ErrInvalid = errors.New("redispool: invalid argument")

// Options configure an Inventory.
type Options struct {
	// Prefix names the shared pool in Redis; required. Inventories (in any
	// number of processes) with the same Prefix on the same server share one
	// idle set and one set of records: one warm pool.
	//
	// Every key is in one Redis Cluster hash slot: if Prefix contains a hash
	// tag ("{...}") the keys are Prefix + name, else "{" + Prefix + "}:" +
	// name. So "warm" gives {warm}:idle, {warm}:items, {warm}:item:<id>, ...
	// and "gw:{warm}:" gives gw:{warm}:idle, ... A Prefix without a hash tag
	// that contains a "}" would split the keys over several slots: New
	// refuses it.
	Prefix string

	// ReplayWindow is how long the outcome of a state-changing call (Add,
	// Pop, Claim, Put, Remove) is kept at most, as a field of one hash
	// under Prefix, so that a call resent after a broken connection lost
	// its reply (by go-redis or by Resends) is answered with the first
	// outcome instead of acting twice. Once a call has returned, a later
	// call of the same Inventory deletes its outcome; the window bounds the
	// outcomes no call deletes (their Inventory stopped). It must exceed
	// the time a call spends being resent. Zero means 1 minute.
	ReplayWindow time.Duration

	// Resends is how many times a call whose connection broke (an error
	// that is neither a server reply nor the end of the caller's context)
	// is sent again, after go-redis's own retries (its MaxRetries), with a
	// pause of 5 ms before the first resend that doubles each time. A
	// broken call may or may not have taken effect; resending it is safe
	// (replay markers, idempotent scripts) and settles which, so the Pool is
	// rarely left unsure whether an item went back to the idle set. Zero
	// means 3; negative means none.
	Resends int

	// WaitReplicas, when positive, makes every call that changes the pool
	// (all but Records and Counts) wait until that many replicas of the
	// master have acknowledged it (WAIT, on the connection that sent it)
	// before it returns; a call they do not acknowledge within WaitTimeout
	// fails with an error matching ErrNotReplicated (it took effect on the
	// master). Set it to the number of replicas of each master: then a
	// replica that takes over from a master has every change a caller was
	// told of (see "Redis Cluster" in the package documentation). It needs
	// a *redis.Client or a *redis.ClusterClient.
	WaitReplicas int

	// WaitTimeout bounds how long a call waits for the replicas; it must be
	// below the client's ReadTimeout. Zero means 1 second.
	WaitTimeout time.Duration
}

// ErrNotReplicated is matched by the error of a call that the master ran
// but fewer than Options.WaitReplicas replicas acknowledged within
// Options.WaitTimeout: a failover could still undo it.
var ErrNotReplicated = errors.New("redispool: not acknowledged by the replicas")

// Inventory is a shared.Inventory on Redis: the idle set and item records of
// a warm pool that several pool.Pool instances, in several processes, share.
//
// Each method is one Lua script (EVALSHA, falling back to EVAL when the
// server does not have it cached), one round trip unless the connection
// breaks, that reads the time from the server's TIME, retires expired
// records and reservations, and makes its change atomically. So any number of Inventories with the same Prefix
// act as one, and the clients' clocks never matter.
//
// Each record is a field of one hash, and its expiry (on the server clock)
// its score in a sorted set, refreshed on Pop, Claim, Put and Touch. The
// records of an instance that crashed therefore expire after the ttl its
// Pool gave them (three janitor intervals for items in use) instead of
// staying forever, and then stop protecting the items from reconciliation;
// the keys themselves expire with their last record.
//
// An Inventory is safe for concurrent use and holds no goroutines; it does
// not own the client.
type Inventory struct {
	client redis.UniversalClient
	keys   []string // keyNames under the prefix
	// scriptKeys are keys and redisrun.Guard: the KEYS of every script.
	scriptKeys []string
	window     string // ReplayWindow in ms
	resends    int
	nonce      string // random, per Inventory
	seq        atomic.Uint64
	wait       redisrun.Wait // no waiting when wait.Replicas is 0
	// returned holds the nonces of state-changing calls that have
	// returned, whose outcomes the next such calls delete.
	returned redisrun.Returned
}

var _ shared.Inventory = (*Inventory)(nil)

// New returns an Inventory that keeps a shared warm pool in Redis through
// client, under opts.Prefix. It does not contact the server. A nil client
// or a bad option returns an error matching ErrInvalid.
func New(client redis.UniversalClient, opts Options) (*Inventory, error) {
	if client == nil {
		return nil, errs.Invalid(ErrInvalid, "redispool: client is nil")
	}
	base, err := rediskey.Base("redispool", opts.Prefix)
	if err != nil {
		return nil, errs.Invalid(ErrInvalid, "%v", err)
	}
	if opts.ReplayWindow < 0 {
		return nil, errs.Invalid(ErrInvalid, "redispool: ReplayWindow (%v) is negative", opts.ReplayWindow)
	}
	if opts.ReplayWindow == 0 {
		opts.ReplayWindow = defaultReplayWindow
	}
	switch {
	case opts.Resends == 0:
		opts.Resends = defaultResends
	case opts.Resends < 0:
		opts.Resends = 0
	}
	wait, err := redisrun.WaitOptions(client, opts.WaitReplicas, opts.WaitTimeout, defaultWaitTimeout)
	if err != nil {
		return nil, errs.Invalid(ErrInvalid, "redispool: %v", err)
	}
	keys := make([]string, len(keyNames))
	for i, n := range keyNames {
		keys[i] = base + n
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return &Inventory{
		client:     client,
		keys:       keys,
		scriptKeys: append(slices.Clip(keys), base+redisrun.Guard),
		window:     strconv.FormatInt(ceilMillis(opts.ReplayWindow), 10),
		resends:    opts.Resends,
		nonce:      hex.EncodeToString(b[:]) + ":",
		wait:       wait,
	}, nil
}

// Keys returns the names of the Redis keys the inventory uses, all of
// them: every key is in one hash slot, and the inventory creates no
// others. (Its scripts also declare one more, the prefix then "guard",
// which is never written: see "Redis Cluster" in the package
// documentation.) Each expires with the last record, reservation or kept outcome it
// holds.
func (inv *Inventory) Keys() []string { return slices.Clone(inv.keys) }

// ceilMillis returns d in whole milliseconds, rounded up so that a positive
// ttl stays positive.
func ceilMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// opNonce returns a fresh nonce for one state-changing call.
func (inv *Inventory) opNonce() string {
	return inv.nonce + strconv.FormatUint(inv.seq.Add(1), 36)
}

// run runs script with the common arguments (the nonces of returned calls,
// nonce, window) followed by args; write says that the script may change
// the pool, so that it waits for replicas when the Inventory does.
func (inv *Inventory) run(ctx context.Context, op string, write bool, script *redis.Script, nonce string, args ...any) (any, error) {
	if err := errs.Canceled(ctx, "redispool", op); err != nil {
		return nil, err
	}
	var gone []string
	if nonce != "" {
		gone = inv.returned.Take()
	}
	all := make([]any, 0, 3+len(args))
	all = append(all, strings.Join(gone, " "), nonce, inv.window)
	all = append(all, args...)
	v, err := inv.send(ctx, op, write, script, all)
	// A call whose connection broke may or may not have run. Resending it is
	// safe and tells which: a state-changing call carries its nonce, so the
	// server answers with the first run's outcome or runs it now; the
	// others (Touch, Reserve, Unreserve, Records, Counts) are idempotent.
	backoff := resendBackoff
	for i := 0; i < inv.resends && redisrun.Broken(err) && redisrun.Sleep(ctx, backoff); i++ {
		v, err = inv.send(ctx, op, write, script, all)
		backoff *= 2
	}
	if nonce != "" {
		if err != nil {
			inv.returned.Add(gone...)
		}
		inv.returned.Add(nonce)
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, errs.Wrap(ctx, "redispool", op, err)
	}
	return v, nil
}

// send runs script once, and again while a cluster refuses it (redisrun.Do);
// with Options.WaitReplicas, a write waits for the replicas.
func (inv *Inventory) send(ctx context.Context, op string, write bool, script *redis.Script, args []any) (any, error) {
	if !write || inv.wait.Replicas == 0 {
		return redisrun.Do(ctx, inv.client, func() (any, error) {
			return script.Run(ctx, inv.client, inv.scriptKeys, args...).Result()
		})
	}
	var acked int
	v, err := redisrun.Do(ctx, inv.client, func() (any, error) {
		v, n, err := redisrun.EvalWait(ctx, inv.client, script, inv.scriptKeys, args, "", inv.wait)
		acked = n
		return v, err
	})
	if err == nil && acked < inv.wait.Replicas {
		err = fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acked, inv.wait.Replicas, inv.wait.Timeout)
	}
	return v, err
}

// resendBackoff is the pause before the first resend; it doubles for each
// further one.
const resendBackoff = 5 * time.Millisecond

func checkTTL(op string, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: %s: negative ttl %v", ErrInvalid, op, ttl)
	}
	return nil
}

func checkID(op, what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s: empty %s", ErrInvalid, op, what)
	}
	return nil
}

// Times travel as Unix nanoseconds in decimal, "" for the zero time, so
// they round-trip exactly.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func parseTime(v any) (time.Time, error) {
	s, _ := v.(string)
	if s == "" {
		return time.Time{}, nil
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ns), nil
}

// parseRecord reads a record from the six reply fields id, owner, data,
// created, deadline, lastUsed.
func parseRecord(op string, f []any) (shared.Record, error) {
	var r shared.Record
	var ok [3]bool
	r.ID, ok[0] = f[0].(string)
	r.Owner, ok[1] = f[1].(string)
	data, okData := f[2].(string)
	ok[2] = okData
	if ok != [3]bool{true, true, true} {
		return shared.Record{}, fmt.Errorf("redispool: %s: malformed record %v", op, f)
	}
	r.Data = []byte(data)
	var err [3]error
	r.Created, err[0] = parseTime(f[3])
	r.Deadline, err[1] = parseTime(f[4])
	r.LastUsed, err[2] = parseTime(f[5])
	if e := errors.Join(err[:]...); e != nil {
		return shared.Record{}, fmt.Errorf("redispool: %s: record %s: %w", op, r.ID, e)
	}
	return r, nil
}

func unexpected(op string, v any) error {
	return fmt.Errorf("redispool: %s: unexpected reply %v", op, v)
}

// Add implements shared.Inventory.
func (inv *Inventory) Add(ctx context.Context, rec shared.Record, ttl time.Duration) error {
	if err := errors.Join(checkID("add", "ID", rec.ID), checkTTL("add", ttl)); err != nil {
		return err
	}
	v, err := inv.run(ctx, "add", true, addScript, inv.opNonce(), rec.ID, rec.Owner, rec.Data,
		fmtTime(rec.Created), fmtTime(rec.Deadline), fmtTime(rec.LastUsed), ceilMillis(ttl))
	if err != nil {
		return err
	}
	switch v {
	case "OK":
		return nil
	case "EXISTS":
		return fmt.Errorf("redispool: add: %w: %q", shared.ErrExists, rec.ID)
	}
	return unexpected("add", v)
}

// Pop implements shared.Inventory. It pops the oldest idle item first.
func (inv *Inventory) Pop(ctx context.Context, owner string, ttl time.Duration) (shared.Record, bool, error) {
	if err := errors.Join(checkID("pop", "owner", owner), checkTTL("pop", ttl)); err != nil {
		return shared.Record{}, false, err
	}
	v, err := inv.run(ctx, "pop", true, popScript, inv.opNonce(), owner, ceilMillis(ttl))
	if err != nil {
		return shared.Record{}, false, err
	}
	f, ok := v.([]any)
	switch {
	case !ok:
		return shared.Record{}, false, unexpected("pop", v)
	case len(f) == 0:
		return shared.Record{}, false, nil
	case len(f) != 6:
		return shared.Record{}, false, unexpected("pop", v)
	}
	r, err := parseRecord("pop", f)
	if err != nil {
		return shared.Record{}, false, err
	}
	return r, true, nil
}

// Claim implements shared.Inventory.
func (inv *Inventory) Claim(ctx context.Context, id, owner string, ttl time.Duration) (bool, error) {
	if err := errors.Join(checkID("claim", "ID", id), checkID("claim", "owner", owner), checkTTL("claim", ttl)); err != nil {
		return false, err
	}
	v, err := inv.run(ctx, "claim", true, claimScript, inv.opNonce(), id, owner, ceilMillis(ttl))
	if err != nil {
		return false, err
	}
	return flag("claim", v)
}

func flag(op string, v any) (bool, error) {
	switch v {
	case int64(1):
		return true, nil
	case int64(0):
		return false, nil
	}
	return false, unexpected(op, v)
}

// Put implements shared.Inventory.
func (inv *Inventory) Put(ctx context.Context, rec shared.Record, maxIdle int, ttl time.Duration) (bool, error) {
	if err := errors.Join(checkID("put", "ID", rec.ID), checkTTL("put", ttl)); err != nil {
		return false, err
	}
	if maxIdle < 0 {
		return false, fmt.Errorf("%w: put: negative maxIdle %d", ErrInvalid, maxIdle)
	}
	v, err := inv.run(ctx, "put", true, putScript, inv.opNonce(), rec.ID, rec.Owner, rec.Data,
		fmtTime(rec.LastUsed), maxIdle, ceilMillis(ttl))
	if err != nil {
		return false, err
	}
	switch v {
	case "OK":
		return true, nil
	case "FULL":
		return false, nil
	case "NOTHELD":
		return false, fmt.Errorf("redispool: put: %w: %q", shared.ErrNotHeld, rec.ID)
	}
	return false, unexpected("put", v)
}

// Touch implements shared.Inventory.
func (inv *Inventory) Touch(ctx context.Context, owner string, ids []string, ttl time.Duration) ([]string, error) {
	if err := errors.Join(checkID("touch", "owner", owner), checkTTL("touch", ttl)); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 2+len(ids))
	args = append(args, owner, ceilMillis(ttl))
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := inv.run(ctx, "touch", true, touchScript, "", args...)
	if err != nil {
		return nil, err
	}
	f, ok := v.([]any)
	if !ok {
		return nil, unexpected("touch", v)
	}
	var lost []string
	for _, x := range f {
		s, ok := x.(string)
		if !ok {
			return nil, unexpected("touch", v)
		}
		lost = append(lost, s)
	}
	return lost, nil
}

// Remove implements shared.Inventory.
func (inv *Inventory) Remove(ctx context.Context, id string) (bool, error) {
	if err := checkID("remove", "ID", id); err != nil {
		return false, err
	}
	v, err := inv.run(ctx, "remove", true, removeScript, inv.opNonce(), id)
	if err != nil {
		return false, err
	}
	return flag("remove", v)
}

// Records implements shared.Inventory. It reads every record in one script,
// so its cost grows with the size of the whole fleet's pool.
func (inv *Inventory) Records(ctx context.Context) ([]shared.Record, error) {
	v, err := inv.run(ctx, "records", false, recordsScript, "")
	if err != nil {
		return nil, err
	}
	f, ok := v.([]any)
	if !ok || len(f)%6 != 0 {
		return nil, unexpected("records", v)
	}
	out := make([]shared.Record, 0, len(f)/6)
	for i := 0; i < len(f); i += 6 {
		r, err := parseRecord("records", f[i:i+6])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Counts implements shared.Inventory.
func (inv *Inventory) Counts(ctx context.Context) (shared.Counts, error) {
	v, err := inv.run(ctx, "counts", false, countsScript, "")
	if err != nil {
		return shared.Counts{}, err
	}
	f, ok := v.([]any)
	if !ok || len(f) != 3 {
		return shared.Counts{}, unexpected("counts", v)
	}
	var n [3]int64
	for i, x := range f {
		if n[i], ok = x.(int64); !ok {
			return shared.Counts{}, unexpected("counts", v)
		}
	}
	return shared.Counts{Idle: int(n[0]), InUse: int(n[1]), Reserved: int(n[2])}, nil
}

// Reserve implements shared.Inventory.
func (inv *Inventory) Reserve(ctx context.Context, token string, target int, ttl time.Duration) (bool, error) {
	if err := errors.Join(checkID("reserve", "token", token), checkTTL("reserve", ttl)); err != nil {
		return false, err
	}
	v, err := inv.run(ctx, "reserve", true, reserveScript, "", token, target, ceilMillis(ttl))
	if err != nil {
		return false, err
	}
	return flag("reserve", v)
}

// Unreserve implements shared.Inventory.
func (inv *Inventory) Unreserve(ctx context.Context, token string) error {
	if err := checkID("unreserve", "token", token); err != nil {
		return err
	}
	_, err := inv.run(ctx, "unreserve", true, unreserveScript, "", token)
	return err
}
