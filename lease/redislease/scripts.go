package redislease

import "github.com/redis/go-redis/v9"

// The store's keys, in the order every script receives them as KEYS,
// followed by redisrun.Guard, which is never written (so that a cluster
// refuses every script while the store's slot migrates).
//
//	leases     HASH  id → record (live, and expired until swept)
//	deadlines  ZSET  id, score = deadline (µs): the live leases
//	expired    ZSET  id, score = deadline (µs): expired, not yet swept
//	holders    ZSET  "<len>:<holder><id>", score 0: the live leases by holder
//	state      HASH  used: summed cost of the live leases; token: the last
//	                 fencing token; gen: the generation of this state (a
//	                 random id set when the state was created, and again
//	                 when a loss was found); since: when (µs); v: the
//	                 version, counting the grants, heartbeats and releases;
//	                 win: the window, how long (µs) a lease granted so far
//	                 can stay live after a loss; hold: until when (µs) grants are refused after a loss;
//	                 w: written by a store that waits for replicas, after
//	                 each call (see redisrun.EvalWait)
//	released   ZSET  id, score = release time (µs): recent releases
//	receipts   HASH  nonce → the reply of a Release or Sweep call
//	receipted  ZSET  nonce, score = when (µs) its receipt may go
//
// A Release or Sweep carries a fresh nonce. A call that took effect leaves
// its reply in receipts, so that the same call repeated by the client after
// its reply was lost (go-redis resends the same command, nonce included)
// returns that reply instead of ErrNotFound or an empty batch; another call
// never sees it. Once the call has returned to the Store, the Store passes
// its nonce with one of its next Release or Sweep calls, which deletes the
// receipt; a receipt that no call deletes (its Store stopped) goes after
// receiptTTL. So the receipts hold about as many entries as there are calls
// in flight, in two keys, however many calls a second the store serves: a
// slot migration moves the same few keys at any load.
var keyNames = [...]string{"leases", "deadlines", "expired", "holders", "state", "released", "receipts", "receipted"}

// prelude starts every script: it reads the server clock, and retires the
// leases whose deadline has passed (moves them from deadlines to expired,
// and takes them out of the holder index and the used units). So every
// script sees only live leases as live, whether or not a sweep has run, and
// each lease is retired once, in O(log n).
//
// A record is "token,cost,created,expires,heartbeat,grace_ns,len(holder),"
// followed by holder and resource; times are µs since the epoch on the
// server's clock, exactly as TIME gives them (never rounded: a stamp
// earlier than the call's arrival would let a client trust a lease longer
// than the store keeps it). Lua prints numbers with 14 significant digits,
// so the 16-digit times are printed with string.format; numbers passed to
// redis.call are converted exactly.
const prelude = `
local LEASES, DEADLINES, EXPIRED, HOLDERS, STATE, RELEASED = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RECEIPTS, RECEIPTED = KEYS[7], KEYS[8]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function fmt(n) return string.format('%d', n) end

local function decode(rec)
  local tok, cost, cr, ex, hb, gr, hl, p = string.match(rec, '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),()')
  hl = tonumber(hl)
  return {tok = tok, cost = cost, cr = cr, ex = ex, hb = hb, gr = gr,
    holder = string.sub(rec, p, p + hl - 1), tail = string.sub(rec, p)}
end

local function encode(l)
  return l.tok .. ',' .. l.cost .. ',' .. l.cr .. ',' .. l.ex .. ',' .. l.hb .. ',' .. l.gr .. ',' .. #l.holder .. ',' .. l.tail
end

-- deadline: the earlier of ExpiresAt and HeartbeatAt + grace, the grace
-- rounded up to whole µs (never earlier than the client's own sum).
local function deadline(l)
  local hbd = tonumber(l.hb) + math.ceil(tonumber(l.gr) / 1000)
  local ex = tonumber(l.ex)
  if hbd < ex then return hbd end
  return ex
end

local function member(holder, id) return #holder .. ':' .. holder .. id end

local expiredIDs = redis.call('ZRANGEBYSCORE', DEADLINES, '-inf', now)
for _, id in ipairs(expiredIDs) do
  local rec = redis.call('HGET', LEASES, id)
  if rec then
    local l = decode(rec)
    redis.call('ZREM', HOLDERS, member(l.holder, id))
    redis.call('HINCRBY', STATE, 'used', -tonumber(l.cost))
    redis.call('ZADD', EXPIRED, deadline(l), id)
  end
  redis.call('ZREM', DEADLINES, id)
end

-- find returns the record of the live lease id, or nil and why not. A
-- holder other than '' must be the lease's.
local function find(id, holder)
  local rec = redis.call('HGET', LEASES, id)
  if not rec then
    if redis.call('ZSCORE', RELEASED, id) then return nil, 'RELEASED' end
    return nil, 'NOTFOUND'
  end
  if holder ~= '' and decode(rec).holder ~= holder then return nil, 'WRONGHOLDER' end
  if redis.call('ZSCORE', EXPIRED, id) then return nil, 'EXPIRED' end
  return rec
end

-- receipt returns the reply kept for the call nonce, after deleting the
-- receipts of the calls ARGV[from..] (returned to their Store) and up to
-- 100 whose time has passed.
local function receipt(nonce, from)
  if #ARGV >= from then
    redis.call('HDEL', RECEIPTS, unpack(ARGV, from))
    redis.call('ZREM', RECEIPTED, unpack(ARGV, from))
  end
  local old = redis.call('ZRANGEBYSCORE', RECEIPTED, '-inf', now, 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', RECEIPTS, unpack(old))
    redis.call('ZREM', RECEIPTED, unpack(old))
  end
  return redis.call('HGET', RECEIPTS, nonce)
end

-- keep keeps reply as the receipt of the call nonce for ttl µs.
local function keep(nonce, reply, ttl)
  redis.call('HSET', RECEIPTS, nonce, reply)
  redis.call('ZADD', RECEIPTED, now + tonumber(ttl), nonce)
end
`

// grantScript: ARGV = id, holder, resource, budget, onePerHolder (0/1),
// overloaded (0/1), ttl (µs), grace (ns), the generation and the version
// the client last saw (empty and 0 if none), the longest window the client
// knows (µs: see below), costs...
//
// It replies 'OK', record, generation, version, window; or 'REJ', reason,
// available, existing id, retry after (µs), generation, version, window;
// or 'DUP'.
//
// First it checks that the state is not older than what the client last
// saw (see "State loss" in the package documentation): a state that is
// missing although the client saw one, that has another generation than
// the client saw, or whose version is below the one the client saw (the
// store went back in time: a replica that missed writes took over, a
// restart lost the last writes) is a loss. A moved slot, a replica in sync
// that took over, a restart with every write are none: the state is as the
// client left it. After a loss no lease is granted for the window, so
// that every lease granted before it has lapsed by the clock of its
// holder, who counts its deadline from when it sent its last acknowledged
// call. The window is the longest time a lease granted so far can stay
// live after a loss: the largest, over the leases, of the smaller of TTL
// and grace (a holder's deadline is at most that after its last call,
// sent before the loss). It is kept in the state (win) and by the clients
// that saw it, and only grows. A
// state that went back gets a new generation, so that every client that
// saw the old one holds grants back too. Tokens never go below the server
// clock in µs, so they keep growing across a loss.
//
// A record already stored under id with the same holder is returned as the
// grant: ids are unique per call, so that is this very call, repeated by
// the client after a reply was lost (go-redis retries on a broken
// connection). A repeat thus never grants twice nor reports a rejection for
// a grant that took effect.
var grantScript = redis.NewScript(prelude + `
local id, holder, seen, seenV = ARGV[1], ARGV[2], ARGV[9], tonumber(ARGV[10])
local st = redis.call('HMGET', STATE, 'gen', 'since', 'hold', 'used', 'token', 'v', 'win')
local gen, hold, v = st[1], tonumber(st[3] or '0'), tonumber(st[6] or '0')
local stWin = tonumber(st[7] or '0')
local win = math.max(tonumber(ARGV[11]), stWin)
local function holdUntil(t)
  if t > hold then
    hold = t
    redis.call('HSET', STATE, 'hold', fmt(hold))
  end
end
local function newGen()
  gen = id
  redis.call('HSET', STATE, 'gen', gen, 'since', fmt(now))
end
if not gen then
  -- No state: a new store, or one that lost everything.
  newGen()
  if seen ~= '' then holdUntil(now + win) end
elseif seen ~= '' and gen ~= seen then
  -- Recreated, or found to have gone back, since this client saw it.
  holdUntil(tonumber(st[2] or '0') + win)
elseif seen ~= '' and v < seenV then
  -- Gone back in time.
  newGen()
  holdUntil(now + win)
end
local old = redis.call('HGET', LEASES, id)
if old then
  if decode(old).holder == holder then return {'OK', old, gen, v, win} end
  return {'DUP'}
end
local avail = tonumber(ARGV[4]) - tonumber(st[4] or '0')
if avail < 0 then avail = 0 end
if now < hold then return {'REJ', 'recovering', avail, '', hold - now, gen, v, win} end
if ARGV[6] == '1' then return {'REJ', 'overloaded', avail, '', 0, gen, v, win} end
if ARGV[5] == '1' then
  local p = #holder .. ':' .. holder
  local m = redis.call('ZRANGEBYLEX', HOLDERS, '[' .. p, '+', 'LIMIT', 0, 1)[1]
  if m and string.sub(m, 1, #p) == p then
    return {'REJ', 'holder_has_lease', avail, string.sub(m, #p + 1), 0, gen, v, win}
  end
end
local cost
for i = 12, #ARGV do
  local c = tonumber(ARGV[i])
  if c <= avail then cost = c; break end
end
if not cost then return {'REJ', 'over_capacity', avail, '', 0, gen, v, win} end
local tok = tonumber(st[5] or '0') + 1
if tok < now then tok = now end
local nowS = fmt(now)
local l = {tok = fmt(tok), cost = cost, cr = nowS, ex = fmt(now + tonumber(ARGV[7])), hb = nowS, gr = ARGV[8],
  holder = holder, tail = holder .. ARGV[3]}
local rec = encode(l)
v = v + 1
redis.call('HSET', LEASES, id, rec)
redis.call('ZADD', DEADLINES, deadline(l), id)
redis.call('ZADD', HOLDERS, 0, member(holder, id))
redis.call('HSET', STATE, 'token', l.tok, 'used', tonumber(st[4] or '0') + cost, 'v', v)
if win > stWin then redis.call('HSET', STATE, 'win', fmt(win)) end
return {'OK', rec, gen, v, win}
`)

// heartbeatScript: ARGV = id, holder (empty for any). It replies 'OK',
// record, generation, version.
var heartbeatScript = redis.NewScript(prelude + `
local rec, err = find(ARGV[1], ARGV[2])
if not rec then return {err} end
local l = decode(rec)
l.hb = fmt(now)
rec = encode(l)
redis.call('HSET', LEASES, ARGV[1], rec)
redis.call('ZADD', DEADLINES, 'XX', deadline(l), ARGV[1])
return {'OK', rec, redis.call('HGET', STATE, 'gen') or '', redis.call('HINCRBY', STATE, 'v', 1)}
`)

// releaseScript: ARGV = id, holder (empty for any), receipt nonce, receipt
// TTL (µs), then the nonces of returned calls whose receipts can go. The
// release is also remembered in released, for a later call on the id
// (lease.ErrReleased). It replies 'OK', record, generation, version; a
// repeat of the call, 'OK', record.
var releaseScript = redis.NewScript(prelude + `
local done = receipt(ARGV[3], 5)
if done then return {'OK', done} end
local rec, err = find(ARGV[1], ARGV[2])
if not rec then return {err} end
local l = decode(rec)
redis.call('HDEL', LEASES, ARGV[1])
redis.call('ZREM', DEADLINES, ARGV[1])
redis.call('ZREM', HOLDERS, member(l.holder, ARGV[1]))
redis.call('HINCRBY', STATE, 'used', -tonumber(l.cost))
redis.call('ZADD', RELEASED, now, ARGV[1])
keep(ARGV[3], rec, ARGV[4])
return {'OK', rec, redis.call('HGET', STATE, 'gen') or '', redis.call('HINCRBY', STATE, 'v', 1)}
`)

// getScript: ARGV = id.
var getScript = redis.NewScript(prelude + `
local rec, err = find(ARGV[1], '')
if not rec then return {err} end
return {'OK', rec}
`)

// listScript returns 'OK' then id, record pairs of the live leases.
var listScript = redis.NewScript(prelude + `
local ids = redis.call('ZRANGE', DEADLINES, 0, -1)
local out = {'OK'}
for i = 1, #ids, 512 do
  local chunk = {unpack(ids, i, math.min(i + 511, #ids))}
  local recs = redis.call('HMGET', LEASES, unpack(chunk))
  for j, id in ipairs(chunk) do
    if recs[j] then
      out[#out + 1] = id
      out[#out + 1] = recs[j]
    end
  end
end
return out
`)

// usageScript returns 'OK', used units, live leases.
var usageScript = redis.NewScript(prelude + `
return {'OK', tonumber(redis.call('HGET', STATE, 'used') or '0'), redis.call('ZCARD', DEADLINES)}
`)

// sweepScript: ARGV = limit, release memory (µs), receipt nonce, receipt
// TTL (µs), then the nonces of returned calls whose receipts can go. It
// removes up to limit expired records, oldest deadline first, and returns
// 'OK' then their id, record pairs. Removal and reply are one script, so
// concurrent sweepers never return one lease twice; a non-empty batch is
// also kept as the call's receipt (each string as its length, ':' and
// itself) for a repeat of the same call. It also forgets releases older
// than the release memory.
var sweepScript = redis.NewScript(prelude + `
local done = receipt(ARGV[3], 5)
if done then
  local out, i = {'OK'}, 1
  while i <= #done do
    local n, p = string.match(done, '^(%d+):()', i)
    n = tonumber(n)
    out[#out + 1] = string.sub(done, p, p + n - 1)
    i = p + n
  end
  return out
end
redis.call('ZREMRANGEBYSCORE', RELEASED, '-inf', now - tonumber(ARGV[2]))
local ids = redis.call('ZRANGE', EXPIRED, 0, tonumber(ARGV[1]) - 1)
local out, parts = {'OK'}, {}
for _, id in ipairs(ids) do
  local rec = redis.call('HGET', LEASES, id)
  if rec then
    out[#out + 1] = id
    out[#out + 1] = rec
    parts[#parts + 1] = #id .. ':' .. id .. #rec .. ':' .. rec
    redis.call('HDEL', LEASES, id)
  end
  redis.call('ZREM', EXPIRED, id)
end
if #out > 1 then keep(ARGV[3], table.concat(parts), ARGV[4]) end
return out
`)
