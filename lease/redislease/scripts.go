package redislease

import "github.com/redis/go-redis/v9"

// The store's keys, in the order every script receives them as KEYS.
//
//	leases     HASH  id → record (live, and expired until swept)
//	deadlines  ZSET  id, score = deadline (µs): the live leases
//	expired    ZSET  id, score = deadline (µs): expired, not yet swept
//	holders    ZSET  "<len>:<holder><id>", score 0: the live leases by holder
//	state      HASH  used: summed cost of the live leases; token: the last
//	                 fencing token; gen: the generation of this state (a
//	                 random id set when the state was created); since: when
//	                 (µs); run: the run_id of the server that last granted
//	                 from it; hold: until when (µs) grants are refused
//	                 after a loss
//	released   ZSET  id, score = release time (µs): recent releases
//
// Release and Sweep get one more key, KEYS[7]: the receipt of that call,
// "receipt:<nonce>" under the same prefix, with a fresh nonce per call. A
// call that took effect leaves its reply there for receiptTTL, so that the
// same call repeated by the client after its reply was lost (go-redis
// resends the same command, nonce included) returns that reply instead of
// ErrNotFound or an empty batch. Another call never sees it.
var keyNames = [...]string{"leases", "deadlines", "expired", "holders", "state", "released"}

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
`

// grantScript: ARGV = id, holder, resource, budget, onePerHolder (0/1),
// overloaded (0/1), ttl (µs), grace (ns), the generation the client last
// saw (” if none), max grace (µs), trust restarts (0/1), costs...
//
// It replies 'OK', record, generation; or 'REJ', reason, available,
// existing id, retry after (µs), generation; or 'DUP'.
//
// First it checks that the state is the one clients were granted leases
// from (see "State loss" in the package documentation): a state that is
// missing although this client saw one, that has another generation than
// this client saw, or that was last granted from by another server run
// (a restart or failover: the data may be older than what clients were
// told) is a loss. After a loss no lease is granted until max grace has
// passed, so that every lease granted before it has lapsed by the
// clock of its holder, who counts its deadline from when it sent its last
// acknowledged call. Tokens never go below the server clock in µs, so
// they keep growing across a loss.
//
// A record already stored under id with the same holder is returned as the
// grant: ids are unique per call, so that is this very call, repeated by
// the client after a reply was lost (go-redis retries on a broken
// connection). A repeat thus never grants twice nor reports a rejection for
// a grant that took effect.
var grantScript = redis.NewScript(prelude + `
local id, holder, seen = ARGV[1], ARGV[2], ARGV[9]
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local st = redis.call('HMGET', STATE, 'gen', 'since', 'run', 'hold', 'used', 'token')
local gen, hold = st[1], tonumber(st[4] or '0')
if not gen then
  -- No state: a new store, or one that lost everything.
  gen, st[2] = id, fmt(now)
  if seen ~= '' then hold = now + tonumber(ARGV[10]) end
  redis.call('HSET', STATE, 'gen', gen, 'since', st[2], 'run', run, 'hold', fmt(hold))
elseif seen ~= '' and gen ~= seen then
  -- Recreated since this client saw it, by a client that never had.
  hold = math.max(hold, tonumber(st[2]) + tonumber(ARGV[10]))
  redis.call('HSET', STATE, 'run', run, 'hold', fmt(hold))
elseif st[3] ~= run then
  -- Another server run: a restart or a failover.
  if ARGV[11] ~= '1' then hold = math.max(hold, now + tonumber(ARGV[10])) end
  redis.call('HSET', STATE, 'run', run, 'hold', fmt(hold))
end
local old = redis.call('HGET', LEASES, id)
if old then
  if decode(old).holder == holder then return {'OK', old, gen} end
  return {'DUP'}
end
local avail = tonumber(ARGV[4]) - tonumber(st[5] or '0')
if avail < 0 then avail = 0 end
if now < hold then return {'REJ', 'recovering', avail, '', hold - now, gen} end
if ARGV[6] == '1' then return {'REJ', 'overloaded', avail, '', 0, gen} end
if ARGV[5] == '1' then
  local p = #holder .. ':' .. holder
  local m = redis.call('ZRANGEBYLEX', HOLDERS, '[' .. p, '+', 'LIMIT', 0, 1)[1]
  if m and string.sub(m, 1, #p) == p then
    return {'REJ', 'holder_has_lease', avail, string.sub(m, #p + 1), 0, gen}
  end
end
local cost
for i = 12, #ARGV do
  local c = tonumber(ARGV[i])
  if c <= avail then cost = c; break end
end
if not cost then return {'REJ', 'over_capacity', avail, '', 0, gen} end
local tok = tonumber(st[6] or '0') + 1
if tok < now then tok = now end
local nowS = fmt(now)
local l = {tok = fmt(tok), cost = cost, cr = nowS, ex = fmt(now + tonumber(ARGV[7])), hb = nowS, gr = ARGV[8],
  holder = holder, tail = holder .. ARGV[3]}
local rec = encode(l)
redis.call('HSET', LEASES, id, rec)
redis.call('ZADD', DEADLINES, deadline(l), id)
redis.call('ZADD', HOLDERS, 0, member(holder, id))
redis.call('HSET', STATE, 'token', l.tok, 'used', tonumber(st[5] or '0') + cost)
return {'OK', rec, gen}
`)

// heartbeatScript: ARGV = id, holder (empty for any).
var heartbeatScript = redis.NewScript(prelude + `
local rec, err = find(ARGV[1], ARGV[2])
if not rec then return {err} end
local l = decode(rec)
l.hb = fmt(now)
rec = encode(l)
redis.call('HSET', LEASES, ARGV[1], rec)
redis.call('ZADD', DEADLINES, 'XX', deadline(l), ARGV[1])
return {'OK', rec}
`)

// releaseScript: KEYS[7] = receipt, ARGV = id, receipt TTL (ms), holder
// (empty for any). The release is also remembered in released, for a later
// call on the id (lease.ErrReleased).
var releaseScript = redis.NewScript(prelude + `
local done = redis.call('GET', KEYS[7])
if done then return {'OK', done} end
local rec, err = find(ARGV[1], ARGV[3])
if not rec then return {err} end
local l = decode(rec)
redis.call('HDEL', LEASES, ARGV[1])
redis.call('ZREM', DEADLINES, ARGV[1])
redis.call('ZREM', HOLDERS, member(l.holder, ARGV[1]))
redis.call('HINCRBY', STATE, 'used', -tonumber(l.cost))
redis.call('ZADD', RELEASED, now, ARGV[1])
redis.call('SET', KEYS[7], rec, 'PX', ARGV[2])
return {'OK', rec}
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

// sweepScript: KEYS[7] = receipt, ARGV = limit, receipt TTL (ms), release
// memory (µs). It removes up to limit expired records, oldest deadline
// first, and returns 'OK' then their id, record pairs. Removal and reply
// are one script, so concurrent sweepers never return one lease twice; a
// non-empty batch is also kept in the receipt (a list) for a repeat of the
// same call. It also forgets releases older than the release memory.
var sweepScript = redis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[7]) == 1 then
  local out = redis.call('LRANGE', KEYS[7], 0, -1)
  table.insert(out, 1, 'OK')
  return out
end
redis.call('ZREMRANGEBYSCORE', RELEASED, '-inf', now - tonumber(ARGV[3]))
local ids = redis.call('ZRANGE', EXPIRED, 0, tonumber(ARGV[1]) - 1)
local out = {'OK'}
for _, id in ipairs(ids) do
  local rec = redis.call('HGET', LEASES, id)
  if rec then
    out[#out + 1] = id
    out[#out + 1] = rec
    redis.call('HDEL', LEASES, id)
  end
  redis.call('ZREM', EXPIRED, id)
end
for i = 2, #out, 512 do
  redis.call('RPUSH', KEYS[7], unpack(out, i, math.min(i + 511, #out)))
end
if #out > 1 then redis.call('PEXPIRE', KEYS[7], ARGV[2]) end
return out
`)
