package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAssignments keeps the assignment records in Redis, as the design
// does: the hash <prefix>:container:{<conversation>} with container_id,
// host, port, created_at, last_active_at and status (running, idle,
// draining), whose expiry every request's end resets; beside it the
// requests in flight, a sorted set <prefix>:inflight:{<conversation>} of
// request tokens scored by their deadline on the server's clock (so that
// the requests of an instance that died stop counting). The braces make the
// conversation a Redis Cluster hash tag: each script touches one slot.
//
// Every method is one Lua script.
type RedisAssignments struct {
	client redis.UniversalClient
	prefix string
}

var _ Assignments = (*RedisAssignments)(nil)

// NewRedisAssignments returns RedisAssignments under prefix ("workspace").
func NewRedisAssignments(client redis.UniversalClient, prefix string) *RedisAssignments {
	return &RedisAssignments{client: client, prefix: prefix}
}

func (a *RedisAssignments) keys(conv string) []string {
	tag := "{" + conv + "}"
	return []string{a.prefix + ":container:" + tag, a.prefix + ":inflight:" + tag}
}

// RecordKey returns the name of conv's hash.
func (a *RedisAssignments) RecordKey(conv string) string { return a.keys(conv)[0] }

// stateLib is shared by the scripts: now in ms on the server's clock, and
// reply(code) returns {code, requests in flight, the hash's fields and
// values...} after dropping expired requests and bringing a status other
// than draining up to date.
const stateLib = `
local H, R = KEYS[1], KEYS[2]
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function recount(ms)
  redis.call('ZREMRANGEBYSCORE', R, '-inf', ms)
  local n = redis.call('ZCARD', R)
  local st = redis.call('HGET', H, 'status')
  if st and st ~= 'draining' then
    local want = 'idle'
    if n > 0 then want = 'running' end
    if st ~= want then redis.call('HSET', H, 'status', want) end
  end
  return n
end
local function reply(code, ms)
  if redis.call('EXISTS', H) == 0 then return {'missing', 0} end
  local n = recount(ms)
  local out = {code, n}
  for _, v in ipairs(redis.call('HGETALL', H)) do out[#out + 1] = v end
  return out
end
`

var (
	getScript = redis.NewScript(stateLib + `return reply('ok', now())`)

	// ARGV: container_id, host, port, created_at, sandbox, last_active_at, ttl ms
	createScript = redis.NewScript(stateLib + `
local ms = now()
if redis.call('EXISTS', H) == 1 then return reply('exists', ms) end
redis.call('HSET', H, 'container_id', ARGV[1], 'host', ARGV[2], 'port', ARGV[3], 'created_at', ARGV[4],
  'sandbox', ARGV[5], 'last_active_at', ARGV[6], 'status', 'idle')
redis.call('PEXPIRE', H, ARGV[7])
redis.call('DEL', R)
return {'created', 0}`)

	// ARGV: token, request ms, last_active_at
	beginScript = redis.NewScript(stateLib + `
local ms = now()
if redis.call('EXISTS', H) == 0 then return {'missing', 0} end
if redis.call('HGET', H, 'status') == 'draining' then return reply('draining', ms) end
local dl = ms + tonumber(ARGV[2])
redis.call('ZADD', R, dl, ARGV[1])
local ttl = redis.call('PTTL', R)
if ttl < tonumber(ARGV[2]) then redis.call('PEXPIRE', R, ARGV[2]) end
redis.call('HSET', H, 'last_active_at', ARGV[3])
return reply('ok', ms)`)

	// ARGV: token, last_active_at, ttl ms
	endScript = redis.NewScript(stateLib + `
local ms = now()
redis.call('ZREM', R, ARGV[1])
if redis.call('EXISTS', H) == 0 then return {'missing', 0} end
redis.call('HSET', H, 'last_active_at', ARGV[2])
redis.call('PEXPIRE', H, ARGV[3])
return reply('ok', ms)`)

	// ARGV: container_id
	drainScript = redis.NewScript(stateLib + `
local ms = now()
if redis.call('HGET', H, 'container_id') ~= ARGV[1] then return {'missing', 0} end
redis.call('HSET', H, 'status', 'draining')
return reply('ok', ms)`)

	undrainScript = redis.NewScript(stateLib + `
local ms = now()
if redis.call('HGET', H, 'container_id') ~= ARGV[1] then return {'missing', 0} end
if redis.call('HGET', H, 'status') == 'draining' then redis.call('HSET', H, 'status', 'idle') end
return reply('ok', ms)`)

	deleteScript = redis.NewScript(stateLib + `
if redis.call('HGET', H, 'container_id') ~= ARGV[1] then return {'missing', 0} end
redis.call('DEL', H, R)
return {'ok', 0}`)
)

func (a *RedisAssignments) run(ctx context.Context, s *redis.Script, conv string, args ...any) (string, Record, error) {
	res, err := s.Run(ctx, a.client, a.keys(conv), args...).Slice()
	if err != nil {
		return "", Record{}, fmt.Errorf("assignments: %s: %w", conv, err)
	}
	if len(res) < 2 {
		return "", Record{}, fmt.Errorf("assignments: %s: unexpected reply %v", conv, res)
	}
	code, _ := res[0].(string)
	rec, err := parseRecord(conv, res[1:])
	return code, rec, err
}

// parseRecord reads {in flight, field, value, ...}.
func parseRecord(conv string, f []any) (Record, error) {
	rec := Record{Conversation: conv}
	n, _ := f[0].(int64)
	rec.InFlight = int(n)
	if len(f) == 1 {
		return rec, nil
	}
	m := map[string]string{}
	for i := 1; i+1 < len(f); i += 2 {
		k, _ := f[i].(string)
		v, _ := f[i+1].(string)
		m[k] = v
	}
	if err := json.Unmarshal([]byte(m["sandbox"]), &rec.Sandbox); err != nil {
		return rec, fmt.Errorf("assignments: %s: sandbox field: %w", conv, err)
	}
	rec.Status = m["status"]
	rec.LastActiveAt, _ = time.Parse(time.RFC3339Nano, m["last_active_at"])
	return rec, nil
}

func ms(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Get implements Assignments.
func (a *RedisAssignments) Get(ctx context.Context, conv string) (Record, bool, error) {
	code, rec, err := a.run(ctx, getScript, conv)
	return rec, code == "ok", err
}

// Create implements Assignments.
func (a *RedisAssignments) Create(ctx context.Context, rec Record, ttl time.Duration) (bool, Record, error) {
	sb, err := json.Marshal(rec.Sandbox)
	if err != nil {
		return false, Record{}, err
	}
	s := rec.Sandbox
	code, existing, err := a.run(ctx, createScript, rec.Conversation,
		s.ID, s.Host, strconv.Itoa(s.Port), stamp(s.Created), string(sb), stamp(time.Now()), ms(ttl))
	if err != nil {
		return false, Record{}, err
	}
	return code == "created", existing, nil
}

// Begin implements Assignments.
func (a *RedisAssignments) Begin(ctx context.Context, conv, token string, dur time.Duration) (Record, error) {
	code, rec, err := a.run(ctx, beginScript, conv, token, ms(dur), stamp(time.Now()))
	switch {
	case err != nil:
		return Record{}, err
	case code == "missing":
		return Record{}, errNoRecord
	case code == "draining":
		return rec, errDraining
	}
	return rec, nil
}

// End implements Assignments.
func (a *RedisAssignments) End(ctx context.Context, conv, token string, ttl time.Duration) error {
	_, _, err := a.run(ctx, endScript, conv, token, stamp(time.Now()), ms(ttl))
	return err
}

// Drain implements Assignments.
func (a *RedisAssignments) Drain(ctx context.Context, conv, sandboxID string) (Record, bool, error) {
	code, rec, err := a.run(ctx, drainScript, conv, sandboxID)
	return rec, code == "ok", err
}

// Undrain implements Assignments.
func (a *RedisAssignments) Undrain(ctx context.Context, conv, sandboxID string) error {
	_, _, err := a.run(ctx, undrainScript, conv, sandboxID)
	return err
}

// Delete implements Assignments.
func (a *RedisAssignments) Delete(ctx context.Context, conv, sandboxID string) error {
	_, _, err := a.run(ctx, deleteScript, conv, sandboxID)
	return err
}
