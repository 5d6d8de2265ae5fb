package redisentities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/ttl"
)

// Options configure a Store.
type Options struct {
	// Prefix names the store's data in Redis; required. Stores (in any
	// number of processes) with the same Prefix on the same server share
	// their entities.
	//
	// Every key is in one Redis Cluster hash slot by construction, as for
	// redisttl.Options.Prefix: "sandboxes" gives the keys {sandboxes}:entities,
	// {sandboxes}:ids and {sandboxes}:since:*. A Prefix whose "}" would
	// end that hash tag early is refused. A Store and a Buffer may share a
	// Prefix: their keys differ.
	Prefix string
}

// Store is an entities.Store on Redis, for systems that keep their shared state
// in Redis and have no SQL database. Every method that writes is one Lua
// script, decided with the server's clock (TIME), so any number of Stores
// on the same keys, in any number of processes, act as one; a Store is
// safe for concurrent use.
//
// The data lives under five keys (and every script also declares a sixth,
// never written, so that a Redis Cluster refuses it whole while the store's
// slot migrates; see the package's "Redis Cluster"): a hash of the entities (one field per
// ID, the record as JSON), a sorted set of the IDs for List's order, and one
// sorted set per ttl.Since whose members are "phase\x00time\x00id", so that
// Apply reads exactly the entities of the rule's phase whose time is past
// the cutoff, with one ZRANGEBYLEX, instead of scanning the whole store.
// Memory is about 700 bytes per entity (714 measured with 13-byte IDs and
// 7-byte phases).
//
// Times are kept to the microsecond and must lie between 1970 and 2255;
// ID, Phase, DesiredState and Operation must be UTF-8 without NUL bytes.
// Other values fail with ttl.ErrInvalid and change nothing.
//
// Redis is the source of truth here, so the store is exactly as durable as
// the server: without persistence (appendonly) a restart loses every
// entity, and a failover to a replica that had not received the last writes
// loses those writes. A system that also finds its resources by label (a
// container's, a process's) should reconcile them against the store, so
// that what such a loss forgets is found again.
type Store struct {
	client redis.UniversalClient
	keys   []string // entities, ids, since:last, since:changed, since:created, and Guard last
}

var _ entities.Store = (*Store)(nil)

// New returns a Store on client under opts.Prefix. It does not contact
// the server; nothing needs creating.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, entities.Invalid("redisentities: client is nil")
	}
	base, err := keyBase("redisentities", opts.Prefix)
	if err != nil {
		return nil, entities.Invalid("%v", err)
	}
	return &Store{client: client, keys: []string{
		base + "entities", base + "ids",
		base + "since:last", base + "since:changed", base + "since:created",
		base + Guard,
	}}, nil
}

// Keys returns the Redis keys of the store: the entity hash, the sorted set
// of IDs and the three time indexes.
func (s *Store) Keys() []string { return append([]string(nil), s.keys[:5]...) }

// storeLib is the Lua shared by the store's scripts. A record is the JSON
// object {p, d, o, l, c, r, x}: phase, desired state, operation, and the
// times last activity, phase changed, created and deleted, each time a
// 16-digit zero-padded count of microseconds since 1970 ("" for none), so
// that comparing two times compares two strings. KEYS[3..5] index the
// entities that are not deleted by l, c and r.
const storeLib = `
local ENT, IDS = KEYS[1], KEYS[2]
local SINCE = {'l', 'c', 'r'}
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function stamp(us) return string.format('%016d', us) end
local function index(cmd, id, r)
  if r.x ~= '' then return end
  for i = 1, 3 do
    local t = r[SINCE[i]]
    if t ~= '' then
      if cmd == 'ZADD' then
        redis.call('ZADD', KEYS[2 + i], 0, r.p .. '\0' .. t .. '\0' .. id)
      else
        redis.call('ZREM', KEYS[2 + i], r.p .. '\0' .. t .. '\0' .. id)
      end
    end
  end
end
`

// createScript inserts ARGV[1] entities given as 8 arguments each (id, p,
// d, o, l, c, r, x), all or none. It returns {"exists", id} when one is
// already present, else the stored records.
var createScript = redis.NewScript(storeLib + `
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local id = ARGV[2 + i * 8]
  if redis.call('HEXISTS', ENT, id) == 1 then return {'exists', id} end
end
local t = stamp(now())
local out = {'ok'}
for i = 0, n - 1 do
  local b = 2 + i * 8
  local id = ARGV[b]
  local r = {p = ARGV[b + 1], d = ARGV[b + 2], o = ARGV[b + 3], l = ARGV[b + 4],
             c = ARGV[b + 5], r = ARGV[b + 6], x = ARGV[b + 7]}
  if r.r == '' then r.r = t end
  if r.l == '' then r.l = r.r end
  if r.c == '' then r.c = r.r end
  local js = cjson.encode(r)
  redis.call('HSET', ENT, id, js)
  redis.call('ZADD', IDS, 0, id)
  index('ZADD', id, r)
  out[#out + 1] = js
end
return out
`)

// updateScript applies one entities.Update to ARGV[1]. ARGV: id, expected
// operation, phase, desired state and last activity ("" = any), then the
// new operation, phase ("" = keep), desired state ("" = keep), clear ("1")
// and delete ("1"). It returns {"notfound"}, {"conflict", record} or
// {"ok", record}.
var updateScript = redis.NewScript(storeLib + `
local id = ARGV[1]
local js = redis.call('HGET', ENT, id)
if not js then return {'notfound'} end
local r = cjson.decode(js)
if r.o ~= ARGV[2] or (ARGV[3] ~= '' and r.p ~= ARGV[3]) or (ARGV[4] ~= '' and r.d ~= ARGV[4])
   or (ARGV[5] ~= '' and r.l > ARGV[5]) then
  return {'conflict', js}
end
local t = stamp(now())
local phase = ARGV[7] ~= '' and ARGV[7] ~= r.p
local delete = ARGV[10] == '1' and r.x == ''
if phase or delete then index('ZREM', id, r) end
r.o = ARGV[6]
if phase then r.p = ARGV[7]; r.c = t end
if ARGV[8] ~= '' then r.d = ARGV[8] end
if ARGV[9] == '1' then r.d = '' end
if delete then r.x = t end
if phase then index('ZADD', id, r) end
js = cjson.encode(r)
redis.call('HSET', ENT, id, js)
return {'ok', js}
`)

// mergeScript sets l = max(l, time) for each (id, time) pair of ARGV whose
// id exists, moving its index entry along.
var mergeScript = redis.NewScript(storeLib + `
for i = 1, #ARGV, 2 do
  local id, t = ARGV[i], ARGV[i + 1]
  local js = redis.call('HGET', ENT, id)
  if js then
    local r = cjson.decode(js)
    if t > r.l then
      if r.x == '' then
        redis.call('ZREM', KEYS[3], r.p .. '\0' .. r.l .. '\0' .. id)
        redis.call('ZADD', KEYS[3], 0, r.p .. '\0' .. t .. '\0' .. id)
      end
      r.l = t
      redis.call('HSET', ENT, id, cjson.encode(r))
    end
  end
end
return #ARGV / 2
`)

// applyScript applies one page of a rule. ARGV: phase, since (1..3), after
// in microseconds, then, cursor (the last index member of the previous
// page, "" for the first) and page size. It returns {scanned, last member,
// now, id, l, id, l, ...} for the entities it changed.
var applyScript = redis.NewScript(storeLib + `
local phase, then_ = ARGV[1], ARGV[4]
local n = now()
local cutoff = n - tonumber(ARGV[3])
if cutoff <= 0 then return {0, '', stamp(n)} end
local lo = '[' .. phase .. '\0'
if ARGV[5] ~= '' then lo = '(' .. ARGV[5] end
local ms = redis.call('ZRANGEBYLEX', KEYS[2 + tonumber(ARGV[2])], lo, '(' .. phase .. '\0' .. stamp(cutoff),
  'LIMIT', 0, tonumber(ARGV[6]))
local out = {#ms, ms[#ms] or '', stamp(n)}
local skip = #phase + 19
for _, m in ipairs(ms) do
  local id = string.sub(m, skip)
  local js = redis.call('HGET', ENT, id)
  if js then
    local r = cjson.decode(js)
    if r.p == phase and r.o == '' and r.x == '' and r.d ~= then_ then
      r.d = then_
      redis.call('HSET', ENT, id, cjson.encode(r))
      out[#out + 1] = id
      out[#out + 1] = r.l
    end
  end
end
return out
`)

// listScript returns one page of List. ARGV: after ("" = from the
// start), scan budget, limit, phase, desired state, has desired state
// ("1"), deleted ("1"). It returns {last id scanned or "", id, record, ...}
// with at most limit entities; the last id is "" when the scan reached the
// end.
var listScript = redis.NewScript(storeLib + `
local lo = '-'
if ARGV[1] ~= '' then lo = '(' .. ARGV[1] end
local budget, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYLEX', IDS, lo, '+', 'LIMIT', 0, budget)
local out = {''}
for _, id in ipairs(ids) do
  local js = redis.call('HGET', ENT, id)
  if js then
    local r = cjson.decode(js)
    if (ARGV[4] == '' or r.p == ARGV[4]) and (ARGV[5] == '' or r.d == ARGV[5])
       and (ARGV[6] ~= '1' or r.d ~= '') and (ARGV[7] == '1' or r.x == '') then
      out[#out + 1] = id
      out[#out + 1] = js
      if (#out - 1) / 2 == limit then
        out[1] = id
        return out
      end
    end
  end
end
if #ids == budget then out[1] = ids[#ids] end
return out
`)

// record is an entity as the scripts store it.
type record struct {
	Phase     string `json:"p"`
	Desired   string `json:"d"`
	Operation string `json:"o"`
	Last      string `json:"l"`
	Changed   string `json:"c"`
	Created   string `json:"r"`
	Deleted   string `json:"x"`
}

// Times outside [minTime, maxTime) cannot be stored: the scripts compare
// 16-digit microsecond counts, and Lua numbers are exact below 2^53.
var (
	minTime = time.UnixMicro(0)
	maxTime = time.UnixMicro(9_000_000_000_000_000)
)

// stamp encodes t as a record time: "" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("%016d", t.UnixMicro())
}

// checkTime reports whether t is zero or storable, naming the field.
func checkTime(id, field string, t time.Time) error {
	if t.IsZero() || (!t.Before(minTime) && t.Before(maxTime)) {
		return nil
	}
	return entities.Invalid("redisentities: entity %q: %s (%v) is outside the storable range 1970-2255", id, field, t)
}

// parseStamp decodes a record time.
func parseStamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisentities: bad time %q in a record", s)
	}
	return time.UnixMicro(us), nil
}

// decode turns a stored record into the entity id.
func decode(id, js string) (entities.Entity, error) {
	var r record
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		return entities.Entity{}, fmt.Errorf("redisentities: entity %q: bad record: %w", id, err)
	}
	e := entities.Entity{ID: id, Phase: r.Phase, DesiredState: r.Desired, Operation: r.Operation}
	var err [4]error
	e.LastActivityAt, err[0] = parseStamp(r.Last)
	e.PhaseChangedAt, err[1] = parseStamp(r.Changed)
	e.CreatedAt, err[2] = parseStamp(r.Created)
	e.DeletedAt, err[3] = parseStamp(r.Deleted)
	return e, errors.Join(err[:]...)
}

// checkEntity validates e for Create and CreateMany.
func checkEntity(e entities.Entity) error {
	if err := entities.CheckCreate("redisentities", e); err != nil {
		return err
	}
	return errors.Join(
		checkTime(e.ID, "LastActivityAt", e.LastActivityAt),
		checkTime(e.ID, "PhaseChangedAt", e.PhaseChangedAt),
		checkTime(e.ID, "CreatedAt", e.CreatedAt),
		checkTime(e.ID, "DeletedAt", e.DeletedAt))
}

// Create inserts e; see entities.Store.Create. A zero CreatedAt is the server's
// TIME.
func (s *Store) Create(ctx context.Context, e entities.Entity) (entities.Entity, error) {
	got, err := s.CreateMany(ctx, []entities.Entity{e})
	if err != nil {
		return entities.Entity{}, err
	}
	return got[0], nil
}

// CreateMany inserts es in one script, all or none; see
// entities.Store.CreateMany. The script holds the server for the whole batch
// (about a microsecond per entity), so split batches of more than a few
// hundred thousand entities.
func (s *Store) CreateMany(ctx context.Context, es []entities.Entity) ([]entities.Entity, error) {
	if len(es) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(es))
	args := make([]any, 1, 1+8*len(es))
	args[0] = len(es)
	for _, e := range es {
		if err := checkEntity(e); err != nil {
			return nil, err
		}
		if seen[e.ID] {
			return nil, entities.Invalid("redisentities: create %q: ID given twice", e.ID)
		}
		seen[e.ID] = true
		args = append(args, e.ID, e.Phase, e.DesiredState, e.Operation,
			stamp(e.LastActivityAt), stamp(e.PhaseChangedAt), stamp(e.CreatedAt), stamp(e.DeletedAt))
	}
	res, err := Do(ctx, s.client, func() ([]string, error) {
		return createScript.Run(ctx, s.client, s.keys, args...).StringSlice()
	})
	if err != nil {
		return nil, entities.Wrap(ctx, "redisentities", "create", err)
	}
	if len(res) == 2 && res[0] == "exists" {
		return nil, fmt.Errorf("redisentities: create %q: %w", res[1], entities.ErrExists)
	}
	if len(res) != len(es)+1 || res[0] != "ok" {
		return nil, fmt.Errorf("redisentities: create: unexpected reply %q", res)
	}
	out := make([]entities.Entity, len(es))
	for i, e := range es {
		if out[i], err = decode(e.ID, res[i+1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Get returns the entity with the given id; see entities.Store.Get.
func (s *Store) Get(ctx context.Context, id string) (entities.Entity, error) {
	js, err := Do(ctx, s.client, func() (string, error) { return s.client.HGet(ctx, s.keys[0], id).Result() })
	switch {
	case errors.Is(err, redis.Nil):
		return entities.Entity{}, fmt.Errorf("redisentities: entity %q: %w", id, entities.ErrNotFound)
	case err != nil:
		return entities.Entity{}, entities.Wrap(ctx, "redisentities", "get "+id, err)
	}
	return decode(id, js)
}

// flag encodes a bool as a script argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}

// Update applies u in one script; see entities.Store.Update.
func (s *Store) Update(ctx context.Context, id string, u entities.Update) (entities.Entity, error) {
	if err := u.Validate(); err != nil {
		return entities.Entity{}, err
	}
	if err := checkTime(id, "ExpectLastActivityAt", u.ExpectLastActivityAt); err != nil {
		return entities.Entity{}, err
	}
	if !entities.Storable(u.Phase) || !entities.Storable(u.DesiredState) || !entities.Storable(u.Operation) {
		return entities.Entity{}, entities.Invalid("redisentities: update %q: Phase, DesiredState and Operation must be UTF-8 without NUL bytes", id)
	}
	res, err := Do(ctx, s.client, func() ([]string, error) {
		return updateScript.Run(ctx, s.client, s.keys, id,
			u.ExpectOperation, u.ExpectPhase, u.ExpectDesiredState, stamp(u.ExpectLastActivityAt),
			u.Operation, u.Phase, u.DesiredState, flag(u.ClearDesiredState), flag(u.Delete)).StringSlice()
	})
	if err != nil {
		return entities.Entity{}, entities.Wrap(ctx, "redisentities", "update "+id, err)
	}
	switch {
	case len(res) == 1 && res[0] == "notfound":
		return entities.Entity{}, fmt.Errorf("redisentities: entity %q: %w", id, entities.ErrNotFound)
	case len(res) == 2 && res[0] == "conflict":
		e, err := decode(id, res[1])
		if err != nil {
			return entities.Entity{}, err
		}
		return entities.Entity{}, fmt.Errorf("redisentities: entity %q: {Operation %q, Phase %q, DesiredState %q, LastActivityAt %v} is not as expected: %w",
			id, e.Operation, e.Phase, e.DesiredState, e.LastActivityAt, entities.ErrConflict)
	case len(res) == 2 && res[0] == "ok":
		return decode(id, res[1])
	}
	return entities.Entity{}, fmt.Errorf("redisentities: update %q: unexpected reply %q", id, res)
}

// mergeChunk bounds the activities of one merge script, so that a huge
// batch never holds the server for long.
const mergeChunk = 1000

// Add merges acts, greatest wins, in one script per 1,000
// distinct ids; see ttl.Store.Add. Each script is atomic and
// only ever moves times forward, so a batch that fails part way is safe to
// retry. An activity time outside 1970-2255 fails with ttl.ErrInvalid
// before anything is sent.
func (s *Store) Add(ctx context.Context, acts []ttl.Activity) error {
	latest := make(map[string]time.Time, len(acts))
	order := make([]string, 0, len(acts))
	for _, a := range acts {
		if err := checkTime(a.ID, "activity time", a.At); err != nil {
			return err
		}
		if a.At.IsZero() {
			continue
		}
		prev, ok := latest[a.ID]
		if !ok {
			order = append(order, a.ID)
		}
		if !ok || a.At.After(prev) {
			latest[a.ID] = a.At
		}
	}
	for len(order) > 0 {
		n := min(len(order), mergeChunk)
		args := make([]any, 0, 2*n)
		for _, id := range order[:n] {
			args = append(args, id, stamp(latest[id]))
		}
		_, err := Do(ctx, s.client, func() (any, error) { return nil, mergeScript.Run(ctx, s.client, s.keys, args...).Err() })
		if err != nil {
			return entities.Wrap(ctx, "redisentities", "merge activity", err)
		}
		order = order[n:]
	}
	return nil
}

// listBudget is how many IDs one List script reads at most.
const listBudget = 1000

// List returns the entities f selects, in ascending byte order of ID; see
// entities.Store.List. It reads the IDs in pages of 1,000 per script, filtering
// on the server, so a selective filter over a large store costs one round
// trip per 1,000 entities scanned. Pages are not one snapshot: an entity
// changed during a List may appear as it was before or after.
func (s *Store) List(ctx context.Context, f entities.Filter) ([]entities.Entity, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Limit == 0 {
		f.Limit = entities.ListLimit
	}
	var out []entities.Entity
	after := f.After
	for len(out) < f.Limit {
		res, err := Do(ctx, s.client, func() ([]string, error) {
			return listScript.Run(ctx, s.client, s.keys, after, listBudget, f.Limit-len(out),
				f.Phase, f.DesiredState, flag(f.HasDesiredState), flag(f.Deleted)).StringSlice()
		})
		if err != nil {
			return nil, entities.Wrap(ctx, "redisentities", "list", err)
		}
		if len(res) == 0 || len(res)%2 != 1 {
			return nil, fmt.Errorf("redisentities: list: unexpected reply of %d elements", len(res))
		}
		for i := 1; i < len(res); i += 2 {
			e, err := decode(res[i], res[i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		if res[0] == "" {
			break
		}
		after = res[0]
	}
	return out, nil
}

// applyPage is how many index entries one Apply script reads at most.
const applyPage = 1000

// Apply applies r at the server's TIME, in one script per 1,000 entities
// past the rule's cutoff; see ttl.Store.Apply. Each script checks and sets
// every entity it reads atomically, so an entity is changed, and returned,
// by exactly one Apply, however many processes apply the rule at once.
func (s *Store) Apply(ctx context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if !entities.Storable(r.Phase) || !entities.Storable(r.Then) {
		return nil, entities.Invalid("redisentities: rule %s: Phase and Then must be UTF-8 without NUL bytes", r)
	}
	var out []ttl.Expiry
	cursor := ""
	for {
		res, err := Do(ctx, s.client, func() ([]any, error) {
			return applyScript.Run(ctx, s.client, s.keys, r.Phase, int(r.Since)+1, r.After.Microseconds(),
				r.Then, cursor, applyPage).Slice()
		})
		if err != nil {
			return out, entities.Wrap(ctx, "redisentities", "apply "+r.String(), err)
		}
		scanned, cur, now, changed, err := parseApply(res)
		if err != nil {
			return out, err
		}
		for i := 0; i < len(changed); i += 2 {
			last, err := parseStamp(changed[i+1])
			if err != nil {
				return out, err
			}
			out = append(out, ttl.Expiry{ID: changed[i], Rule: r.String(), Then: r.Then, LastActivityAt: last, DecidedAt: now})
		}
		if scanned < applyPage {
			return out, nil
		}
		cursor = cur
	}
}

// parseApply splits an applyScript reply.
func parseApply(res []any) (scanned int64, cursor string, now time.Time, changed []string, err error) {
	bad := fmt.Errorf("redisentities: apply: unexpected reply %v", res)
	if len(res) < 3 || len(res)%2 != 1 {
		return 0, "", time.Time{}, nil, bad
	}
	scanned, ok1 := res[0].(int64)
	cursor, ok2 := res[1].(string)
	ns, ok3 := res[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return 0, "", time.Time{}, nil, bad
	}
	if now, err = parseStamp(ns); err != nil {
		return 0, "", time.Time{}, nil, err
	}
	changed = make([]string, len(res)-3)
	for i, v := range res[3:] {
		if changed[i], ok1 = v.(string); !ok1 {
			return 0, "", time.Time{}, nil, bad
		}
	}
	return scanned, cursor, now, changed, nil
}
