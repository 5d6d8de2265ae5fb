package redispool

import "github.com/redis/go-redis/v9"

// Every script receives the inventory's fixed keys first, in this order,
// and ARGV[1] = the item key prefix, ARGV[2] = the operation's replay
// marker key (or "" for operations that are naturally idempotent),
// ARGV[3] = the replay window (ms).
//
//	idle   ZSET  id, score = FIFO position (µs on the server clock, strictly
//	             increasing): the live idle items
//	items  ZSET  id, score = expiry (ms on the server clock, +inf for none):
//	             every live record, idle or in use
//	res    ZSET  token, score = expiry (ms, +inf for none): warm reservations
//
// and one HASH per item, <prefix>item:<id>, with the fields o (owner, ""
// when idle), d (data), c, dl, lu (created, deadline, last used: Unix
// nanoseconds as decimal strings, "" for the zero time) and a key expiry
// (PEXPIREAT) equal to its score in items, so that the records of a fleet
// that died vanish from Redis on their own. The index ZSETs expire with the
// last of their members for the same reason.
//
// Item keys are built inside the scripts (Pop cannot know its item in
// advance); they carry the same hash tag as the fixed keys, so in Redis
// Cluster they live in the same slot.
var fixedKeys = [...]string{"idle", "items", "res"}

// prelude starts every script: read the server clock, then retire every
// record whose expiry has passed (and, in the scripts that read them, every
// reservation), so each script sees only live ones whether or not Redis has
// reclaimed the keys yet. Each record is retired once, in O(log n).
const prelude = `
local IDLE, ITEMS, RES = KEYS[1], KEYS[2], KEYS[3]
local BASE, OPKEY, WINDOW = ARGV[1], ARGV[2], ARGV[3]
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)

local function num(x) return string.format('%.0f', x) end

local dead = redis.call('ZRANGEBYSCORE', ITEMS, '-inf', num(now))
for _, id in ipairs(dead) do
  redis.call('DEL', BASE .. id)
  redis.call('ZREM', IDLE, id)
end
if #dead > 0 then redis.call('ZREMRANGEBYSCORE', ITEMS, '-inf', num(now)) end

-- purgeRes retires expired reservations; the scripts that read them call it.
local function purgeRes() redis.call('ZREMRANGEBYSCORE', RES, '-inf', num(now)) end

-- drop forgets id everywhere.
local function drop(id)
  redis.call('DEL', BASE .. id)
  redis.call('ZREM', ITEMS, id)
  redis.call('ZREM', IDLE, id)
end

-- live reports whether id has a live record. A record key that is gone
-- although its index entry is live (deleted by hand) counts as absent.
local function live(id)
  if not redis.call('ZSCORE', ITEMS, id) then return false end
  if redis.call('EXISTS', BASE .. id) == 0 then
    drop(id)
    return false
  end
  return true
end

-- setttl gives the record of id a fresh ttl (ms; 0 = none).
local function setttl(id, ttl)
  local key = BASE .. id
  if ttl <= 0 then
    redis.call('PERSIST', key)
    redis.call('ZADD', ITEMS, '+inf', id)
  else
    local exp = num(now + ttl)
    redis.call('PEXPIREAT', key, exp)
    redis.call('ZADD', ITEMS, exp, id)
  end
end

-- enqueue puts id at the back of the idle set.
local function enqueue(id)
  local pos = nowus
  local last = redis.call('ZRANGE', IDLE, -1, -1, 'WITHSCORES')
  if last[2] and tonumber(last[2]) >= pos then pos = tonumber(last[2]) + 1 end
  redis.call('ZADD', IDLE, num(pos), id)
end

local function isinf(s) return s == 'inf' or s == '+inf' end

-- tidy makes the index keys expire with their last member: the records'
-- indexes unless noItems, the reservations unless noRes. A script that adds,
-- refreshes or removes members tidies that index; the prelude's purge need
-- not, as it removes only expired members, never the last one of a set that
-- lives on.
local function tidy(noItems, noRes)
  local last
  if not noItems then
    last = redis.call('ZRANGE', ITEMS, -1, -1, 'WITHSCORES')
    if last[2] then
      if isinf(last[2]) then
        redis.call('PERSIST', ITEMS)
        redis.call('PERSIST', IDLE)
      else
        redis.call('PEXPIREAT', ITEMS, last[2])
        redis.call('PEXPIREAT', IDLE, last[2])
      end
    end
  end
  if not noRes then
    last = redis.call('ZRANGE', RES, -1, -1, 'WITHSCORES')
    if last[2] then
      if isinf(last[2]) then redis.call('PERSIST', RES) else redis.call('PEXPIREAT', RES, last[2]) end
    end
  end
end

-- replayed returns the stored outcome of this very operation when it has
-- already run: go-redis resends a command whose reply was lost to a broken
-- connection, and the resend must not act twice.
local function replayed()
  if OPKEY == '' then return false end
  return redis.call('GET', OPKEY)
end

-- done stores the operation's outcome for replayed, then tidies the
-- records' indexes.
local function done(outcome)
  if OPKEY ~= '' then redis.call('SET', OPKEY, outcome, 'PX', WINDOW) end
  tidy(false, true)
end

local function fields(id)
  return redis.call('HMGET', BASE .. id, 'o', 'd', 'c', 'dl', 'lu')
end
`

// addScript: ARGV[4..] = id, owner, data, created, deadline, lastUsed, ttl.
var addScript = redis.NewScript(prelude + `
local id, owner = ARGV[4], ARGV[5]
local ttl = tonumber(ARGV[10])
if replayed() then return 'OK' end
if live(id) then return 'EXISTS' end
redis.call('DEL', BASE .. id)
redis.call('HSET', BASE .. id, 'o', owner, 'd', ARGV[6], 'c', ARGV[7], 'dl', ARGV[8], 'lu', ARGV[9])
setttl(id, ttl)
if owner == '' then enqueue(id) end
done('OK')
return 'OK'
`)

// popScript: ARGV[4..] = owner, ttl. Reply: {} when the idle set is empty,
// else {id, owner, data, created, deadline, lastUsed}.
var popScript = redis.NewScript(prelude + `
local owner, ttl = ARGV[4], tonumber(ARGV[5])
local prev = replayed()
if prev then
  if live(prev) then
    local f = fields(prev)
    if f[1] == owner then return {prev, f[1], f[2], f[3], f[4], f[5]} end
  end
  return {}
end
while true do
  local head = redis.call('ZRANGE', IDLE, 0, 0)
  local id = head[1]
  if not id then
    tidy(false, true)
    return {}
  end
  redis.call('ZREM', IDLE, id)
  if live(id) then
    redis.call('HSET', BASE .. id, 'o', owner)
    setttl(id, ttl)
    done(id)
    local f = fields(id)
    return {id, f[1], f[2], f[3], f[4], f[5]}
  end
end
`)

// claimScript: ARGV[4..] = id, owner, ttl. Reply 1 if claimed, else 0.
var claimScript = redis.NewScript(prelude + `
local id, owner, ttl = ARGV[4], ARGV[5], tonumber(ARGV[6])
local prev = replayed()
if prev then return tonumber(prev) end
if not live(id) or not redis.call('ZSCORE', IDLE, id) then
  tidy(false, true)
  return 0
end
redis.call('ZREM', IDLE, id)
redis.call('HSET', BASE .. id, 'o', owner)
setttl(id, ttl)
done('1')
return 1
`)

// putScript: ARGV[4..] = id, owner, data, lastUsed, maxIdle, ttl.
// Reply 'OK', 'FULL' or 'NOTHELD'.
var putScript = redis.NewScript(prelude + `
local id, owner, maxIdle, ttl = ARGV[4], ARGV[5], tonumber(ARGV[8]), tonumber(ARGV[9])
local prev = replayed()
if prev then return prev end
if not live(id) then
  tidy(false, true)
  return 'NOTHELD'
end
local cur = redis.call('HGET', BASE .. id, 'o')
if cur == '' or cur ~= owner then return 'NOTHELD' end
if maxIdle > 0 and redis.call('ZCARD', IDLE) >= maxIdle then
  done('FULL')
  return 'FULL'
end
redis.call('HSET', BASE .. id, 'o', '', 'd', ARGV[6], 'lu', ARGV[7])
setttl(id, ttl)
enqueue(id)
done('OK')
return 'OK'
`)

// touchScript: ARGV[4..] = owner, ttl, ids... Reply: the ids not in use by
// owner.
var touchScript = redis.NewScript(prelude + `
local owner, ttl = ARGV[4], tonumber(ARGV[5])
local lost = {}
for i = 6, #ARGV do
  local id = ARGV[i]
  if live(id) and redis.call('HGET', BASE .. id, 'o') == owner then
    setttl(id, ttl)
  else
    table.insert(lost, id)
  end
end
tidy(false, true)
return lost
`)

// removeScript: ARGV[4] = id. Reply 1 if a live record was removed.
var removeScript = redis.NewScript(prelude + `
local id = ARGV[4]
local prev = replayed()
if prev then return tonumber(prev) end
if not live(id) then
  tidy(false, true)
  return 0
end
drop(id)
done('1')
return 1
`)

// recordsScript: reply {id, owner, data, created, deadline, lastUsed, ...}
// for every live record.
var recordsScript = redis.NewScript(prelude + `
local out = {}
for _, id in ipairs(redis.call('ZRANGE', ITEMS, 0, -1)) do
  if live(id) then
    local f = fields(id)
    table.insert(out, id)
    for j = 1, 5 do table.insert(out, f[j]) end
  end
end
tidy(false, true)
return out
`)

// countsScript: reply {idle, inUse, reserved}.
var countsScript = redis.NewScript(prelude + `
purgeRes()
local idle, all = redis.call('ZCARD', IDLE), redis.call('ZCARD', ITEMS)
return {idle, all - idle, redis.call('ZCARD', RES)}
`)

// reserveScript: ARGV[4..] = token, target, ttl. Reply 1 if reserved.
var reserveScript = redis.NewScript(prelude + `
local token, target, ttl = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
purgeRes()
if not redis.call('ZSCORE', RES, token) and
    redis.call('ZCARD', IDLE) + redis.call('ZCARD', RES) >= target then
  return 0
end
if ttl <= 0 then
  redis.call('ZADD', RES, '+inf', token)
else
  redis.call('ZADD', RES, num(now + ttl), token)
end
tidy(true, false)
return 1
`)

// unreserveScript: ARGV[4] = token.
var unreserveScript = redis.NewScript(prelude + `
redis.call('ZREM', RES, ARGV[4])
tidy(true, false)
return 1
`)
