package redisttl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/rediskey"
	"github.com/ttlkit/ttlkit/internal/redisrun"
	"github.com/ttlkit/ttlkit/ttl"
)

// keyName is the name of the sorted set under Options.Prefix.
const keyName = "activity"

// intervalsName names the set of the Trackers' flush intervals (see
// NoteFlushInterval): under Options.Prefix, or after Options.Key.
const intervalsName = "flush-intervals"

// addChunk bounds the members of one ZADD, so that a huge batch never
// becomes one huge command; the chunks of a batch go in one pipeline.
const addChunk = 4096

// Options configure a Buffer.
type Options struct {
	// Prefix names the buffer's data in Redis; required. Buffers (in any
	// number of processes) with the same Prefix on the same server share
	// one buffer.
	//
	// The key is in one Redis Cluster hash slot by construction: if Prefix
	// contains a hash tag ("{...}") the key is Prefix + "activity", else
	// "{" + Prefix + "}:activity". So "app" gives {app}:activity.
	// A Prefix whose "}" would end that hash tag early is refused.
	// Required unless Key is set.
	Prefix string
	// Key, if set, is the sorted set's exact name, used as it is, for a
	// system whose design names it ("app:activity"); Prefix is then
	// ignored. The buffer is one key, so it needs no hash tag to live in
	// one Redis Cluster slot; its scripts' guard key is put in the same
	// slot (under the key's hash tag, or under one that is the whole key).
	Key string
}

// Buffer is a ttl.Buffer on a Redis sorted set. It is safe for concurrent
// use, also by several processes sharing the key.
type Buffer struct {
	client redis.UniversalClient
	key    string
	// intervals is the set of the Trackers' flush intervals, in key's
	// Redis Cluster slot.
	intervals string
	// scriptKeys are key and redisrun.Guard: the KEYS of the scripts that
	// write (see Remove).
	scriptKeys []string
	// cluster: the client is a *redis.ClusterClient, so Remove always
	// runs its script (see Remove).
	cluster bool

	// beforeExec, if set (tests only), runs in Remove between the
	// comparison and the EXEC that deletes.
	beforeExec func()
}

var (
	_ ttl.Buffer = (*Buffer)(nil)
	_ ttl.Lossy  = (*Buffer)(nil)
	_ ttl.Paced  = (*Buffer)(nil)
)

// generationPrefix starts the member that holds the buffer's generation in
// the sorted set, at score -inf, below every activity. Activity for an id
// that starts with it is dropped by Add.
const generationPrefix = "\x00ttlkit-generation:"

// generationScript returns the generation member of KEYS[1], adding
// ARGV[1] as the new one if there is none.
var generationScript = redis.NewScript(`
local g = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if g[1] and g[2] == '-inf' then return g[1] end
redis.call('ZADD', KEYS[1], '-inf', ARGV[1])
return ARGV[1]
`)

// Generation returns the buffer's generation (see ttl.Lossy). It is kept
// in the sorted set itself, as a member at score -inf, so that whatever
// loses the set loses the generation with it: a server restarted without
// persistence, FLUSHDB, a DEL of Key, an eviction. If there is none, it
// adds a new random one. A failover to a replica that had not received the
// last writes keeps the generation and is not detected.
func (b *Buffer) Generation(ctx context.Context) (string, error) {
	var token [12]byte
	if _, err := rand.Read(token[:]); err != nil {
		return "", fmt.Errorf("redisttl: generation: %w", err)
	}
	g, err := redisrun.Do(ctx, b.client, func() (string, error) {
		return generationScript.Run(ctx, b.client, b.scriptKeys, generationPrefix+hex.EncodeToString(token[:])).Text()
	})
	if err != nil {
		return "", errs.Wrap(ctx, "redisttl", "generation", err)
	}
	return strings.TrimPrefix(g, generationPrefix), nil
}

// New returns a Buffer that keeps its entries in Redis through client, under
// opts.Prefix or in opts.Key. It does not contact the server. A nil client or a bad
// Prefix returns an error that names it and matches ttl.ErrInvalid.
func New(client redis.UniversalClient, opts Options) (*Buffer, error) {
	if client == nil {
		return nil, errs.Invalid(ttl.ErrInvalid, "redisttl: client is nil")
	}
	_, cluster := client.(*redis.ClusterClient)
	if opts.Key != "" {
		guard, err := guardFor(opts.Key)
		if err != nil {
			return nil, err
		}
		// In the key's slot: under its hash tag, or under the one guardFor
		// checked.
		intervals := opts.Key + ":" + intervalsName
		if _, ok := rediskey.Tag(opts.Key); !ok {
			intervals = "{" + opts.Key + "}:" + intervalsName
		}
		return &Buffer{client: client, key: opts.Key, intervals: intervals,
			scriptKeys: []string{opts.Key, guard}, cluster: cluster}, nil
	}
	base, err := rediskey.Base("redisttl", opts.Prefix)
	if err != nil {
		return nil, errs.Invalid(ttl.ErrInvalid, "%v", err)
	}
	key := base + keyName
	return &Buffer{client: client, key: key, intervals: base + intervalsName,
		scriptKeys: []string{key, base + redisrun.Guard}, cluster: cluster}, nil
}

// guardFor returns the guard key (redisrun.Guard) of a buffer named key,
// in key's Redis Cluster slot: under key's hash tag if it has one, else
// under a tag that is the whole key. A key whose "}" would end that tag
// early is refused.
func guardFor(key string) (string, error) {
	if tag, ok := rediskey.Tag(key); ok {
		return "{" + tag + "}:" + redisrun.Guard, nil
	}
	guard := "{" + key + "}:" + redisrun.Guard
	if tag, ok := rediskey.Tag(guard); !ok || tag != key {
		return "", errs.Invalid(ttl.ErrInvalid, "redisttl: Key %q: a \"}\" without a hash tag before it; name the set without one, or give it a hash tag such as \"{name}\"", key)
	}
	return guard, nil
}

// NoteFlushInterval records that a Tracker flushes every d, in a set of
// intervals (SADD of its nanoseconds) beside the sorted set and in its
// Redis Cluster slot: Prefix + "flush-intervals", or Key +
// ":flush-intervals". The set has no expiry; an interval no Tracker uses
// any more lengthens a Runner's hold until the set is deleted or lost.
func (b *Buffer) NoteFlushInterval(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return errs.Invalid(ttl.ErrInvalid, "redisttl: flush interval (%v) must be positive", d)
	}
	_, err := redisrun.Do(ctx, b.client, func() (int64, error) {
		return b.client.SAdd(ctx, b.intervals, int64(d)).Result()
	})
	if err != nil {
		return errs.Wrap(ctx, "redisttl", "note flush interval", err)
	}
	return nil
}

// FlushInterval returns the longest interval noted (see NoteFlushInterval),
// or 0 if none was.
func (b *Buffer) FlushInterval(ctx context.Context) (time.Duration, error) {
	ns, err := redisrun.Do(ctx, b.client, func() ([]string, error) {
		return b.client.SMembers(ctx, b.intervals).Result()
	})
	if err != nil {
		return 0, errs.Wrap(ctx, "redisttl", "flush interval", err)
	}
	var longest time.Duration
	for _, s := range ns {
		d, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redisttl: flush interval: member %q of %s: %w", s, b.intervals, err)
		}
		longest = max(longest, time.Duration(d))
	}
	return longest, nil
}

// score returns the score Add stores for t: Unix milliseconds. Finer
// resolution is truncated, so Peek returns scoreTime(score(t)).
func score(t time.Time) int64 { return t.UnixMilli() }

// scoreTime returns the time a score stands for, in UTC.
func scoreTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// Add merges acts into the sorted set with ZADD GT: for every id the
// greatest time wins, including between repeats of an id in acts. A batch
// is one ZADD, or one pipeline of ZADDs of at most 4096 members.
func (b *Buffer) Add(ctx context.Context, acts []ttl.Activity) error {
	if len(acts) == 0 {
		return nil
	}
	if err := errs.Canceled(ctx, "redisttl", "add"); err != nil {
		return err
	}
	zadd := func(c redis.Cmdable, acts []ttl.Activity) *redis.IntCmd {
		members := make([]redis.Z, 0, len(acts))
		for _, a := range acts {
			if !strings.HasPrefix(a.ID, generationPrefix) {
				members = append(members, redis.Z{Score: float64(score(a.At)), Member: a.ID})
			}
		}
		if len(members) == 0 {
			return redis.NewIntResult(0, nil)
		}
		return c.ZAddGT(ctx, b.key, members...)
	}
	_, err := redisrun.Do(ctx, b.client, func() (int64, error) {
		if len(acts) <= addChunk {
			return zadd(b.client, acts).Result()
		}
		_, err := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < len(acts); i += addChunk {
				zadd(p, acts[i:min(i+addChunk, len(acts))])
			}
			return nil
		})
		return 0, err
	})
	if err != nil {
		return errs.Wrap(ctx, "redisttl", "add", err)
	}
	return nil
}

// peekAfterScript returns, WITHSCORES, up to ARGV[3] members that come
// after the member ARGV[2] at score ARGV[1] in the sorted set's order
// (score, then member byte-wise). The cursor need not be in the set any
// more: the script counts the members below its score, then binary
// searches the members of equal score for the first one after it, so a
// page costs O(log n) plus its size, even when thousands of members share
// one score. Members compare byte by byte, as Redis orders them; Lua's own
// string comparison follows the server's locale.
var peekAfterScript = redis.NewScript(`
local key, s, m, max = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])
local function after(x)
  local n = math.min(#x, #m)
  for i = 1, n do
    local a, b = string.byte(x, i), string.byte(m, i)
    if a ~= b then return a > b end
  end
  return #x > #m
end
local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
local hi = redis.call('ZCOUNT', key, '-inf', s)
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  if after(redis.call('ZRANGE', key, mid, mid)[1]) then hi = mid else lo = mid + 1 end
end
return redis.call('ZRANGE', key, lo, lo + max - 1, 'WITHSCORES')
`)

// Peek returns up to max entries after after, in (score, member) order,
// which is (At, ID) order, without removing them: ZRANGE for the first
// page, and a script that finds the cursor's place for the next ones.
func (b *Buffer) Peek(ctx context.Context, after ttl.Activity, max int) ([]ttl.Activity, error) {
	if max <= 0 {
		return nil, errs.Invalid(ttl.ErrInvalid, "redisttl: peek max (%d) must be positive", max)
	}
	var (
		zs  []redis.Z
		err error
	)
	zs, err = redisrun.Do(ctx, b.client, func() ([]redis.Z, error) {
		if after.ID == "" && after.At.IsZero() {
			// Everything above -inf: the generation member is not activity.
			return b.client.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
				Key: b.key, Start: "(-inf", Stop: "+inf", ByScore: true, Count: int64(max),
			}).Result()
		}
		return b.peekAfter(ctx, after, max)
	})
	if err != nil {
		return nil, errs.Wrap(ctx, "redisttl", "peek", err)
	}
	out := make([]ttl.Activity, len(zs))
	for i, z := range zs {
		id, ok := z.Member.(string)
		if !ok {
			return nil, fmt.Errorf("redisttl: peek: member of type %T in %s", z.Member, b.key)
		}
		out[i] = ttl.Activity{ID: id, At: scoreTime(int64(z.Score))}
	}
	return out, nil
}

// peekAfter runs peekAfterScript and parses its flat member, score reply.
func (b *Buffer) peekAfter(ctx context.Context, after ttl.Activity, max int) ([]redis.Z, error) {
	v, err := peekAfterScript.Run(ctx, b.client, []string{b.key},
		strconv.FormatInt(score(after.At), 10), after.ID, max).StringSlice()
	if err != nil {
		return nil, err
	}
	if len(v)%2 != 0 {
		return nil, fmt.Errorf("odd reply of %d elements", len(v))
	}
	zs := make([]redis.Z, len(v)/2)
	for i := range zs {
		score, err := strconv.ParseFloat(v[2*i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("score %q: %w", v[2*i+1], err)
		}
		zs[i] = redis.Z{Member: v[2*i], Score: score}
	}
	return zs, nil
}

// removeScript is Remove's fallback when a write refused its EXEC: it
// deletes every member whose score still equals the one given for it and
// returns how many it deleted. ARGV holds the n members, then
// their n scores, so that members pass to ZMSCORE and ZREM straight from
// ARGV, in chunks below Lua's unpack limit, without building tables; in the
// common case where nothing changed since Peek, a chunk costs one ZMSCORE
// and one ZREM. A score compares as a string first (Redis prints integral
// scores as plain digits) and as a number otherwise: scores are integers
// below 2^53, exact on both sides.
var removeScript = redis.NewScript(`
local key, n, half = KEYS[1], 0, #ARGV / 2
for f = 1, half, 4000 do
  local l = math.min(f + 3999, half)
  local have = redis.call('ZMSCORE', key, unpack(ARGV, f, l))
  local dels, all = {}, true
  for j = f, l do
    local h, w = have[j - f + 1], ARGV[half + j]
    if h and (h == w or tonumber(h) == tonumber(w)) then
      dels[#dels + 1] = ARGV[j]
    else
      all = false
    end
  end
  if all then
    n = n + redis.call('ZREM', key, unpack(ARGV, f, l))
  elseif #dels > 0 then
    n = n + redis.call('ZREM', key, unpack(dels))
  end
end
return n
`)

// Remove deletes, atomically, every entry of acts whose score still equals
// score(At), and reports how many it deleted. An entry that an Add made
// newer since Peek, or that is gone, is left alone. Redis 6.2 or later is
// required (ZMSCORE, as ZADD GT).
//
// Remove reads the current scores with ZMSCORE under WATCH, compares them
// in the client and deletes the unchanged members with ZREM in MULTI/EXEC:
// EXEC runs only if no other client wrote the key since the WATCH, so the
// comparison still holds when the members go. If an Add did write the key
// in between, EXEC does nothing and Remove runs the same comparison in one
// Lua script instead, which nothing can interleave with. Either way it is
// one atomic compare-and-remove; the first way costs the server less than
// a script that receives every member and score as arguments. Through a
// Redis Cluster client Remove always runs the script: a transaction on a
// slot in migration is aborted, where a script is refused whole and sent
// again (see "Redis Cluster" in the package documentation).
func (b *Buffer) Remove(ctx context.Context, acts []ttl.Activity) (int, error) {
	if len(acts) == 0 {
		return 0, nil
	}
	if err := errs.Canceled(ctx, "redisttl", "remove"); err != nil {
		return 0, err
	}
	var (
		n   int
		err error
	)
	if !b.cluster {
		n, err = b.removeWatched(ctx, acts)
	}
	if b.cluster || errors.Is(err, redis.TxFailedErr) {
		n, err = redisrun.Do(ctx, b.client, func() (int, error) { return b.removeScripted(ctx, acts) })
	}
	if err != nil {
		return 0, errs.Wrap(ctx, "redisttl", "remove", err)
	}
	return n, nil
}

// removeWatched is Remove's optimistic path: WATCH, ZMSCORE, compare,
// MULTI ZREM EXEC. It returns redis.TxFailedErr if the key was written
// between the WATCH and the EXEC, having deleted nothing.
func (b *Buffer) removeWatched(ctx context.Context, acts []ttl.Activity) (int, error) {
	members := make([]string, len(acts))
	for i, a := range acts {
		members[i] = a.ID
	}
	n := 0
	err := b.client.Watch(ctx, func(tx *redis.Tx) error {
		have, err := tx.ZMScore(ctx, b.key, members...).Result()
		if err != nil {
			return err
		}
		if len(have) != len(acts) {
			return fmt.Errorf("zmscore returned %d scores for %d members", len(have), len(acts))
		}
		dels := make([]any, 0, len(acts))
		for i, a := range acts {
			// A missing member reads as 0; deleting it is a no-op that
			// ZREM does not count, so a time at the epoch needs no care.
			if have[i] == float64(score(a.At)) {
				dels = append(dels, a.ID)
			}
		}
		if b.beforeExec != nil {
			b.beforeExec()
		}
		if len(dels) == 0 {
			return nil
		}
		var zrem *redis.IntCmd
		if _, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			zrem = p.ZRem(ctx, b.key, dels...)
			return nil
		}); err != nil {
			return err
		}
		n = int(zrem.Val())
		return nil
	}, b.key)
	return n, err
}

// removeScripted is Remove's fallback: the whole compare-and-remove in one
// Lua call.
func (b *Buffer) removeScripted(ctx context.Context, acts []ttl.Activity) (int, error) {
	args := make([]any, 2*len(acts))
	for i, a := range acts {
		args[i] = a.ID
		args[len(acts)+i] = strconv.FormatInt(score(a.At), 10)
	}
	return removeScript.Run(ctx, b.client, b.scriptKeys, args...).Int()
}
