package redislease

import "github.com/redis/go-redis/v9"

// The store's keys, in the order every script receives them as KEYS.
//
//	leases     HASH  id → record (live, and expired until swept)
//	deadlines  ZSET  id, score = deadline (ms): the live leases
//	expired    ZSET  id, score = deadline (ms): expired, not yet swept
//	holders    ZSET  "<len>:<holder><id>", score 0: the live leases by holder
//	used       STRING summed cost of the live leases
//	token      STRING the last fencing token issued (INCR)
//
// Release and Sweep get a seventh key, KEYS[7]: the receipt of that call,
// "receipt:<nonce>" under the same prefix, with a fresh nonce per call. A
// call that took effect leaves its reply there for receiptTTL, so that the
// same call repeated by the client after its reply was lost (go-redis
// resends the same command, nonce included) returns that reply instead of
// ErrNotFound or an empty batch. Another call never sees it.
var keyNames = [...]string{"leases", "deadlines", "expired", "holders", "used", "token"}

// prelude starts every script: it reads the server clock, and retires the
// leases whose deadline has passed (moves them from deadlines to expired,
// and takes them out of the holder index and the used units). So every
// script sees only live leases as live, whether or not a sweep has run, and
// each lease is retired once, in O(log n).
//
// A record is "token,cost,created,expires,heartbeat,grace_ns,len(holder),"
// followed by holder and resource; times are ms since the epoch on the
// server's clock. Lua formats numbers with 14 significant digits, exact for
// these integers, so plain concatenation suffices (string.format would cost
// more than a Redis call).
const prelude = `
local LEASES, DEADLINES, EXPIRED, HOLDERS, USED, TOKEN = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function decode(rec)
  local tok, cost, cr, ex, hb, gr, hl, p = string.match(rec, '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),()')
  hl = tonumber(hl)
  return {tok = tok, cost = cost, cr = cr, ex = ex, hb = hb, gr = gr,
    holder = string.sub(rec, p, p + hl - 1), tail = string.sub(rec, p)}
end

local function encode(l)
  return l.tok .. ',' .. l.cost .. ',' .. l.cr .. ',' .. l.ex .. ',' .. l.hb .. ',' .. l.gr .. ',' .. #l.holder .. ',' .. l.tail
end

local function deadline(l)
  local hbd = tonumber(l.hb) + math.ceil(tonumber(l.gr) / 1000000)
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
    redis.call('DECRBY', USED, l.cost)
    redis.call('ZADD', EXPIRED, deadline(l), id)
  end
  redis.call('ZREM', DEADLINES, id)
end

-- find returns the record of the live lease id, or nil and why not. A
-- holder other than '' must be the lease's.
local function find(id, holder)
  local rec = redis.call('HGET', LEASES, id)
  if not rec then return nil, 'NOTFOUND' end
  if holder ~= '' and decode(rec).holder ~= holder then return nil, 'WRONGHOLDER' end
  if redis.call('ZSCORE', EXPIRED, id) then return nil, 'EXPIRED' end
  return rec
end
`

// grantScript: ARGV = id, holder, resource, budget, onePerHolder (0/1),
// overloaded (0/1), ttl (ms), grace (ns), costs...
//
// A record already stored under id with the same holder is returned as the
// grant: ids are unique per call, so that is this very call, repeated by
// the client after a reply was lost (go-redis retries on a broken
// connection). A repeat thus never grants twice nor reports a rejection for
// a grant that took effect.
var grantScript = redis.NewScript(prelude + `
local id, holder = ARGV[1], ARGV[2]
local old = redis.call('HGET', LEASES, id)
if old then
  if decode(old).holder == holder then return {'OK', old} end
  return {'DUP'}
end
local avail = tonumber(ARGV[4]) - tonumber(redis.call('GET', USED) or '0')
if avail < 0 then avail = 0 end
if ARGV[6] == '1' then return {'REJ', 'overloaded', avail} end
if ARGV[5] == '1' then
  local p = #holder .. ':' .. holder
  local m = redis.call('ZRANGEBYLEX', HOLDERS, '[' .. p, '+', 'LIMIT', 0, 1)[1]
  if m and string.sub(m, 1, #p) == p then
    return {'REJ', 'holder_has_lease', avail, string.sub(m, #p + 1)}
  end
end
local cost
for i = 9, #ARGV do
  local c = tonumber(ARGV[i])
  if c <= avail then cost = c; break end
end
if not cost then return {'REJ', 'over_capacity', avail} end
local l = {tok = redis.call('INCR', TOKEN), cost = cost, cr = now,
  ex = now + tonumber(ARGV[7]), hb = now, gr = ARGV[8], holder = holder, tail = holder .. ARGV[3]}
local rec = encode(l)
redis.call('HSET', LEASES, id, rec)
redis.call('ZADD', DEADLINES, deadline(l), id)
redis.call('ZADD', HOLDERS, 0, member(holder, id))
redis.call('INCRBY', USED, cost)
return {'OK', rec}
`)

// heartbeatScript: ARGV = id, holder (” for any).
var heartbeatScript = redis.NewScript(prelude + `
local rec, err = find(ARGV[1], ARGV[2])
if not rec then return {err} end
local l = decode(rec)
l.hb = now
rec = encode(l)
redis.call('HSET', LEASES, ARGV[1], rec)
redis.call('ZADD', DEADLINES, 'XX', deadline(l), ARGV[1])
return {'OK', rec}
`)

// releaseScript: KEYS[7] = receipt, ARGV = id, receipt TTL (ms), holder
// (” for any).
var releaseScript = redis.NewScript(prelude + `
local done = redis.call('GET', KEYS[7])
if done then return {'OK', done} end
local rec, err = find(ARGV[1], ARGV[3])
if not rec then return {err} end
local l = decode(rec)
redis.call('HDEL', LEASES, ARGV[1])
redis.call('ZREM', DEADLINES, ARGV[1])
redis.call('ZREM', HOLDERS, member(l.holder, ARGV[1]))
redis.call('DECRBY', USED, l.cost)
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
return {'OK', tonumber(redis.call('GET', USED) or '0'), redis.call('ZCARD', DEADLINES)}
`)

// sweepScript: KEYS[7] = receipt, ARGV = limit, receipt TTL (ms). It
// removes up to limit expired records, oldest deadline first, and returns
// 'OK' then their id, record pairs. Removal and reply are one script, so
// concurrent sweepers never return one lease twice; a non-empty batch is
// also kept in the receipt (a list) for a repeat of the same call.
var sweepScript = redis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[7]) == 1 then
  local out = redis.call('LRANGE', KEYS[7], 0, -1)
  table.insert(out, 1, 'OK')
  return out
end
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
