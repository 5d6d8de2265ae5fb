package redispool

import "github.com/redis/go-redis/v9"

// The inventory's keys, in the order every script receives them as KEYS:
//
//	idle     ZSET  id, score = FIFO position (µs on the server clock,
//	               strictly increasing): the live idle items
//	items    ZSET  id, score = expiry (ms on the server clock, +inf for
//	               none): every live record, idle or in use
//	res      ZSET  token, score = expiry (ms, +inf for none): warm
//	               reservations
//	records  HASH  id → record: created, deadline and last used (Unix
//	               nanoseconds as decimal strings, "" for the zero time),
//	               then the owner ("" when idle) as its length, ":" and
//	               itself, then the data: "c,dl,lu,<len>:<owner><data>"
//	replies  HASH  nonce → the outcome of a state-changing call
//	replied  ZSET  nonce, score = when (ms) its outcome may go
//
// Every key a script touches is one of these, declared, and they share one
// hash tag: on a Redis Cluster they are in one slot. The scripts declare
// one more, redisrun.Guard, which is never written, so that the cluster
// refuses them whole (TRYAGAIN) while the slot migrates. The keys expire
// with the last record, reservation or reply they hold, so that a fleet
// that died leaves nothing behind.
//
// ARGV[1] holds the nonces of returned calls whose outcomes can go
// (space-separated), ARGV[2] the call's own nonce ("" for calls that are
// naturally idempotent), ARGV[3] how long its outcome is kept (ms); the
// call's own arguments follow from ARGV[4]. A state-changing call keeps its
// outcome in replies under its nonce, so that the same call resent after a
// broken connection lost its reply (by go-redis or by Options.Resends)
// returns that outcome instead of acting twice. The Inventory passes the
// nonce of a call that has returned with one of its next calls, which
// deletes the outcome; one that no call deletes goes after the window. So
// the replies hold about as many entries as there are calls in flight.
var keyNames = [...]string{"idle", "items", "res", "records", "replies", "replied"}

// prelude starts every script: read the server clock, then retire every
// record whose expiry has passed (and, in the scripts that read them, every
// reservation), so each script sees only live ones whether or not Redis has
// expired the keys yet. Each record is retired once, in O(log n).
const prelude = `
local IDLE, ITEMS, RES, RECORDS, REPLIES, REPLIED = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local NONCE, WINDOW = ARGV[2], ARGV[3]
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)

local function num(x) return string.format('%.0f', x) end

local dead = redis.call('ZRANGEBYSCORE', ITEMS, '-inf', num(now))
for i = 1, #dead, 512 do
  local chunk = {unpack(dead, i, math.min(i + 511, #dead))}
  redis.call('HDEL', RECORDS, unpack(chunk))
  redis.call('ZREM', IDLE, unpack(chunk))
end
if #dead > 0 then redis.call('ZREMRANGEBYSCORE', ITEMS, '-inf', num(now)) end

-- purgeRes retires expired reservations; the scripts that read them call it.
local function purgeRes() redis.call('ZREMRANGEBYSCORE', RES, '-inf', num(now)) end

-- drop forgets id everywhere.
local function drop(id)
  redis.call('HDEL', RECORDS, id)
  redis.call('ZREM', ITEMS, id)
  redis.call('ZREM', IDLE, id)
end

-- live reports whether id has a live record. A record that is gone
-- although its index entry is live (deleted by hand) counts as absent.
local function live(id)
  if not redis.call('ZSCORE', ITEMS, id) then return false end
  if redis.call('HEXISTS', RECORDS, id) == 0 then
    drop(id)
    return false
  end
  return true
end

local function decode(rec)
  local c, dl, lu, n, p = string.match(rec, '^([^,]*),([^,]*),([^,]*),(%d+):()')
  n = tonumber(n)
  return {c = c, dl = dl, lu = lu, o = string.sub(rec, p, p + n - 1), d = string.sub(rec, p + n)}
end

local function encode(r) return r.c .. ',' .. r.dl .. ',' .. r.lu .. ',' .. #r.o .. ':' .. r.o .. r.d end

-- get returns the record of id (which must exist), decoded.
local function get(id) return decode(redis.call('HGET', RECORDS, id)) end

local function put(id, r) redis.call('HSET', RECORDS, id, encode(r)) end

-- setttl gives the record of id a fresh ttl (ms; 0 = none).
local function setttl(id, ttl)
  if ttl <= 0 then
    redis.call('ZADD', ITEMS, '+inf', id)
  else
    redis.call('ZADD', ITEMS, num(now + ttl), id)
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

-- expireWith makes keys expire with the last member of index (by score),
-- or never if that score is +inf.
local function expireWith(index, keys)
  local last = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
  if not last[2] then return end
  for _, k in ipairs(keys) do
    if isinf(last[2]) then redis.call('PERSIST', k) else redis.call('PEXPIREAT', k, last[2]) end
  end
end

-- tidy makes the record keys expire with their last record unless
-- noItems, and the reservations with their last one unless noRes. A script
-- that adds, refreshes or removes members tidies that index; the prelude's
-- purge need not, as it removes only expired members, never the last one
-- of a set that lives on.
local function tidy(noItems, noRes)
  if not noItems then expireWith(ITEMS, {ITEMS, IDLE, RECORDS}) end
  if not noRes then expireWith(RES, {RES}) end
end

-- replayed returns the stored outcome of this very call when it has
-- already run: go-redis resends a command whose reply was lost to a broken
-- connection, and the resend must not act twice. First it deletes the
-- outcomes of the calls in ARGV[1] (returned to their Inventory) and up to
-- 100 whose window has passed.
local function replayed()
  if NONCE == '' then return false end
  local gone = {}
  for n in string.gmatch(ARGV[1], '%S+') do gone[#gone + 1] = n end
  local old = redis.call('ZRANGEBYSCORE', REPLIED, '-inf', num(now), 'LIMIT', 0, 100)
  for _, n in ipairs(old) do gone[#gone + 1] = n end
  if #gone > 0 then
    redis.call('HDEL', REPLIES, unpack(gone))
    redis.call('ZREM', REPLIED, unpack(gone))
  end
  local prev = redis.call('HGET', REPLIES, NONCE)
  -- Written again, so that an Inventory that waits for replicas waits for
  -- a write after the first run's.
  if prev then redis.call('HSET', REPLIES, NONCE, prev) end
  return prev
end

-- done stores the call's outcome for replayed, then tidies the records'
-- indexes.
local function done(outcome)
  if NONCE ~= '' then
    redis.call('HSET', REPLIES, NONCE, outcome)
    redis.call('ZADD', REPLIED, num(now + tonumber(WINDOW)), NONCE)
    expireWith(REPLIED, {REPLIES, REPLIED})
  end
  tidy(false, true)
end

-- fields returns what a reply carries of the record of id.
local function fields(id)
  local r = get(id)
  return {r.o, r.d, r.c, r.dl, r.lu}
end
`

// addScript: ARGV[4..] = id, owner, data, created, deadline, lastUsed, ttl.
var addScript = redis.NewScript(prelude + `
local id, owner = ARGV[4], ARGV[5]
local ttl = tonumber(ARGV[10])
if replayed() then return 'OK' end
if live(id) then return 'EXISTS' end
put(id, {o = owner, d = ARGV[6], c = ARGV[7], dl = ARGV[8], lu = ARGV[9]})
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
    local r = get(id)
    r.o = owner
    put(id, r)
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
local r = get(id)
r.o = owner
put(id, r)
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
local r = get(id)
if r.o == '' or r.o ~= owner then return 'NOTHELD' end
if maxIdle > 0 and redis.call('ZCARD', IDLE) >= maxIdle then
  done('FULL')
  return 'FULL'
end
r.o, r.d, r.lu = '', ARGV[6], ARGV[7]
put(id, r)
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
  if live(id) and get(id).o == owner then
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
