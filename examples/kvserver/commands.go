package main

import (
	"math"
	"strings"
	"time"
)

// Error replies, worded as Redis 7 words them.
const (
	errSyntax     = "ERR syntax error"
	errNotInteger = "ERR value is not an integer or out of range"
)

func errArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

func errExpireTime(name string) string {
	return "ERR invalid expire time in '" + name + "' command"
}

// locking says how a command holds Server.mu.
type locking int

const (
	lockNone  locking = iota // touches no keys
	lockRead                 // reads keys
	lockWrite                // changes keys
)

// command is one entry of the command table; the fields after handler are
// what COMMAND reports.
type command struct {
	name    string // lower case, "container|sub" for subcommands
	arity   int    // n: exactly n arguments with the name; -n: at least n
	lock    locking
	handler func(s *Server, cl *client, args [][]byte)
	flags   []string
	first   int // position of the first key, 0 if none
	last    int // position of the last key, -1 for "up to the end"
	step    int
	subs    map[string]*command
}

var commands map[string]*command

func init() {
	table := []*command{
		{name: "ping", arity: -1, handler: cmdPing, flags: []string{"fast", "stale"}},
		{name: "echo", arity: 2, handler: cmdEcho, flags: []string{"fast"}},
		{name: "quit", arity: -1, handler: cmdQuit, flags: []string{"fast", "stale", "noscript"}},
		{name: "select", arity: 2, handler: cmdSelect, flags: []string{"fast", "stale", "loading"}},
		{name: "hello", arity: -1, handler: cmdHello, flags: []string{"fast", "stale", "noscript", "no_auth"}},
		{name: "auth", arity: -2, handler: cmdAuth, flags: []string{"fast", "stale", "noscript", "no_auth"}},
		{name: "info", arity: -1, handler: cmdInfo, flags: []string{"stale", "loading"}},
		{name: "dbsize", arity: 1, lock: lockRead, handler: cmdDBSize, flags: []string{"readonly", "fast"}},
		{name: "flushdb", arity: -1, lock: lockWrite, handler: cmdFlushDB, flags: []string{"write"}},
		{name: "get", arity: 2, lock: lockRead, handler: cmdGet, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1},
		{name: "set", arity: -3, lock: lockWrite, handler: cmdSet, flags: []string{"write", "denyoom"}, first: 1, last: 1, step: 1},
		{name: "del", arity: -2, lock: lockWrite, handler: cmdDel, flags: []string{"write"}, first: 1, last: -1, step: 1},
		{name: "exists", arity: -2, lock: lockRead, handler: cmdExists, flags: []string{"readonly", "fast"}, first: 1, last: -1, step: 1},
		{name: "expire", arity: -3, lock: lockWrite, handler: expireCommand(time.Second, true), flags: []string{"write", "fast"}, first: 1, last: 1, step: 1},
		{name: "pexpire", arity: -3, lock: lockWrite, handler: expireCommand(time.Millisecond, true), flags: []string{"write", "fast"}, first: 1, last: 1, step: 1},
		{name: "expireat", arity: -3, lock: lockWrite, handler: expireCommand(time.Second, false), flags: []string{"write", "fast"}, first: 1, last: 1, step: 1},
		{name: "pexpireat", arity: -3, lock: lockWrite, handler: expireCommand(time.Millisecond, false), flags: []string{"write", "fast"}, first: 1, last: 1, step: 1},
		{name: "ttl", arity: 2, lock: lockRead, handler: ttlCommand(time.Second), flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1},
		{name: "pttl", arity: 2, lock: lockRead, handler: ttlCommand(time.Millisecond), flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1},
		{name: "expiretime", arity: 2, lock: lockRead, handler: expireTimeCommand(time.Second), flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1},
		{name: "pexpiretime", arity: 2, lock: lockRead, handler: expireTimeCommand(time.Millisecond), flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1},
		{name: "persist", arity: 2, lock: lockWrite, handler: cmdPersist, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1},
		{name: "command", arity: -1, handler: cmdCommand, flags: []string{"loading", "stale"}, subs: subcommands(
			&command{name: "count", arity: 2, handler: cmdCommandCount},
			&command{name: "info", arity: -2, handler: cmdCommandInfo},
			&command{name: "docs", arity: -2, handler: cmdCommandDocs},
			&command{name: "list", arity: -2, handler: cmdCommandList},
			&command{name: "help", arity: 2, handler: cmdCommandHelp},
		)},
		{name: "client", arity: -2, flags: []string{"stale", "loading"}, subs: subcommands(
			&command{name: "id", arity: 2, handler: cmdClientID},
			&command{name: "getname", arity: 2, handler: cmdClientGetName},
			&command{name: "setname", arity: 3, handler: cmdClientSetName},
			&command{name: "setinfo", arity: 4, handler: cmdClientSetInfo},
			&command{name: "help", arity: 2, handler: cmdClientHelp},
		)},
	}
	commands = make(map[string]*command, len(table))
	for _, c := range table {
		commands[c.name] = c
		for _, sub := range c.subs {
			sub.name = c.name + "|" + sub.name
			sub.flags = c.flags
		}
	}
}

func subcommands(cs ...*command) map[string]*command {
	m := make(map[string]*command, len(cs))
	for _, c := range cs {
		m[c.name] = c
	}
	return m
}

// dispatch runs one command and writes its reply.
func (s *Server) dispatch(cl *client, args [][]byte) {
	cmd := commands[strings.ToLower(string(args[0]))]
	if cmd == nil {
		cl.w.Error(unknownCommand(args))
		return
	}
	if cmd.subs != nil && len(args) >= 2 {
		sub := cmd.subs[strings.ToLower(string(args[1]))]
		if sub == nil {
			cl.w.Error("ERR unknown subcommand '" + trunc(string(args[1]), 128) + "'. Try " +
				strings.ToUpper(string(args[0])) + " HELP.")
			return
		}
		cmd = sub
	}
	if n := len(args); (cmd.arity > 0 && n != cmd.arity) || n < -cmd.arity {
		cl.w.Error(errArity(cmd.name))
		return
	}
	switch cmd.lock {
	case lockRead:
		s.mu.RLock()
		defer s.mu.RUnlock()
	case lockWrite:
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	cmd.handler(s, cl, args)
}

// unknownCommand words the error exactly as Redis 7 does, quoting at most
// about 128 bytes of the arguments.
func unknownCommand(args [][]byte) string {
	var b strings.Builder
	b.WriteString("ERR unknown command '")
	b.WriteString(trunc(string(args[0]), 128))
	b.WriteString("', with args beginning with: ")
	n := 0
	for _, a := range args[1:] {
		if n >= 128 {
			break
		}
		q := "'" + trunc(string(a), 128-n) + "' "
		b.WriteString(q)
		n += len(q)
	}
	return b.String()
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func cmdPing(s *Server, cl *client, args [][]byte) {
	switch len(args) {
	case 1:
		cl.w.Simple("PONG")
	case 2:
		cl.w.Bulk(string(args[1]))
	default:
		cl.w.Error(errArity("ping"))
	}
}

func cmdEcho(s *Server, cl *client, args [][]byte) { cl.w.Bulk(string(args[1])) }

func cmdQuit(s *Server, cl *client, args [][]byte) {
	cl.w.Simple("OK")
	cl.quit = true
}

func cmdSelect(s *Server, cl *client, args [][]byte) {
	n, ok := parseInt(args[1])
	switch {
	case !ok || n < math.MinInt32 || n > math.MaxInt32:
		cl.w.Error(errNotInteger)
	case n != 0:
		cl.w.Error("ERR DB index is out of range")
	default:
		cl.w.Simple("OK")
	}
}

func cmdGet(s *Server, cl *client, args [][]byte) {
	if v, ok := s.db.Get(string(args[1])); ok {
		cl.w.Bulk(v)
	} else {
		cl.w.Null()
	}
}

func cmdDel(s *Server, cl *client, args [][]byte) {
	var n int64
	for _, k := range args[1:] {
		if s.db.Delete(string(k)) {
			n++
		}
	}
	cl.w.Int(n)
}

func cmdExists(s *Server, cl *client, args [][]byte) {
	var n int64
	for _, k := range args[1:] {
		if _, ok := s.db.Deadline(string(k)); ok {
			n++
		}
	}
	cl.w.Int(n)
}

func cmdPersist(s *Server, cl *client, args [][]byte) {
	if s.db.Persist(string(args[1])) {
		cl.w.Int(1)
	} else {
		cl.w.Int(0)
	}
}

func cmdDBSize(s *Server, cl *client, args [][]byte) { cl.w.Int(int64(s.db.Len())) }

func cmdFlushDB(s *Server, cl *client, args [][]byte) {
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "sync") &&
		!strings.EqualFold(string(args[1]), "async")) {
		cl.w.Error(errSyntax)
		return
	}
	s.db.Clear()
	cl.w.Simple("OK")
}

// SET flags, as in Redis's parseExtendedStringArgumentsOrReply.
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setEX
	setPX
	setEXAT
	setPXAT
)

const setExpireFlags = setEX | setPX | setEXAT | setPXAT

func cmdSet(s *Server, cl *client, args [][]byte) {
	key, val := string(args[1]), string(args[2])
	flags := 0
	var expire []byte
	for j := 3; j < len(args); j++ {
		opt := strings.ToLower(string(args[j]))
		hasNext := j+1 < len(args)
		var f int
		switch {
		case opt == "nx" && flags&setXX == 0:
			f = setNX
		case opt == "xx" && flags&setNX == 0:
			f = setXX
		case opt == "get":
			f = setGet
		case opt == "keepttl" && flags&setExpireFlags == 0:
			f = setKeepTTL
		case opt == "ex" && flags&(setKeepTTL|setExpireFlags&^setEX) == 0 && hasNext:
			f = setEX
		case opt == "px" && flags&(setKeepTTL|setExpireFlags&^setPX) == 0 && hasNext:
			f = setPX
		case opt == "exat" && flags&(setKeepTTL|setExpireFlags&^setEXAT) == 0 && hasNext:
			f = setEXAT
		case opt == "pxat" && flags&(setKeepTTL|setExpireFlags&^setPXAT) == 0 && hasNext:
			f = setPXAT
		default:
			cl.w.Error(errSyntax)
			return
		}
		flags |= f
		if f&setExpireFlags != 0 {
			j++
			expire = args[j]
		}
	}

	var deadline time.Time
	if flags&setExpireFlags != 0 {
		ms, ok := parseInt(expire)
		if !ok {
			cl.w.Error(errNotInteger)
			return
		}
		seconds := flags&(setEX|setEXAT) != 0
		if ms <= 0 || (seconds && ms > math.MaxInt64/1000) {
			cl.w.Error(errExpireTime("set"))
			return
		}
		if seconds {
			ms *= 1000
		}
		if flags&(setEX|setPX) != 0 {
			now := s.now().UnixMilli()
			if ms > math.MaxInt64-now {
				cl.w.Error(errExpireTime("set"))
				return
			}
			ms += now
		}
		deadline = time.UnixMilli(ms)
	}

	old, found := s.db.Get(key)
	if flags&setGet != 0 {
		if found {
			cl.w.Bulk(old)
		} else {
			cl.w.Null()
		}
	}
	if (flags&setNX != 0 && found) || (flags&setXX != 0 && !found) {
		if flags&setGet == 0 {
			cl.w.Null()
		}
		return
	}
	switch {
	case !deadline.IsZero():
		s.db.SetWithDeadline(key, val, deadline)
	case flags&setKeepTTL != 0:
		if at, ok := s.db.Deadline(key); ok && !at.IsZero() && at.After(s.now()) {
			s.db.SetWithDeadline(key, val, at)
		} else {
			s.db.Set(key, val)
		}
	default:
		s.db.Set(key, val)
	}
	if flags&setGet == 0 {
		cl.w.Simple("OK")
	}
}

// EXPIRE flags.
const (
	expireNX = 1 << iota
	expireXX
	expireGT
	expireLT
)

// expireCommand returns EXPIRE (unit s, relative), PEXPIRE, EXPIREAT and
// PEXPIREAT. As in Redis, a deadline that is not in the future deletes the
// key, and the reply says whether the key existed and the condition held.
func expireCommand(unit time.Duration, relative bool) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		name := strings.ToLower(string(args[0]))
		// Options first, then the time: Redis reports a bad option before
		// a bad time.
		flags := 0
		for _, a := range args[3:] {
			switch strings.ToLower(string(a)) {
			case "nx":
				flags |= expireNX
			case "xx":
				flags |= expireXX
			case "gt":
				flags |= expireGT
			case "lt":
				flags |= expireLT
			default:
				cl.w.Error("ERR Unsupported option " + string(a))
				return
			}
		}
		if flags&expireNX != 0 && flags&(expireXX|expireGT|expireLT) != 0 {
			cl.w.Error("ERR NX and XX, GT or LT options at the same time are not compatible")
			return
		}
		if flags&expireGT != 0 && flags&expireLT != 0 {
			cl.w.Error("ERR GT and LT options at the same time are not compatible")
			return
		}
		when, ok := parseInt(args[2])
		if !ok {
			cl.w.Error(errNotInteger)
			return
		}
		if unit == time.Second {
			if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
				cl.w.Error(errExpireTime(name))
				return
			}
			when *= 1000
		}
		if relative {
			now := s.now().UnixMilli()
			if when > math.MaxInt64-now {
				cl.w.Error(errExpireTime(name))
				return
			}
			when += now
		}
		key := string(args[1])
		cur, found := s.db.Deadline(key)
		if !found {
			cl.w.Int(0)
			return
		}
		curMS := int64(-1)
		if !cur.IsZero() {
			curMS = cur.UnixMilli()
		}
		if (flags&expireNX != 0 && curMS != -1) ||
			(flags&expireXX != 0 && curMS == -1) ||
			(flags&expireGT != 0 && (curMS == -1 || when <= curMS)) ||
			(flags&expireLT != 0 && curMS != -1 && when >= curMS) {
			cl.w.Int(0)
			return
		}
		if s.db.ExpireAt(key, time.UnixMilli(when)) {
			cl.w.Int(1)
		} else {
			cl.w.Int(0)
		}
	}
}

// ttlCommand returns TTL (unit s) and PTTL: -2 for a missing key, -1 for a
// key without a deadline, else the time left, rounded as Redis rounds it.
func ttlCommand(unit time.Duration) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		at, ok := s.db.Deadline(string(args[1]))
		switch {
		case !ok:
			cl.w.Int(-2)
		case at.IsZero():
			cl.w.Int(-1)
		default:
			ms := max(at.UnixMilli()-s.now().UnixMilli(), 0)
			if unit == time.Second {
				ms = (ms + 500) / 1000
			}
			cl.w.Int(ms)
		}
	}
}

// expireTimeCommand returns EXPIRETIME and PEXPIRETIME: the deadline as a
// Unix time, -1 without one, -2 for a missing key.
func expireTimeCommand(unit time.Duration) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		at, ok := s.db.Deadline(string(args[1]))
		switch {
		case !ok:
			cl.w.Int(-2)
		case at.IsZero():
			cl.w.Int(-1)
		case unit == time.Second:
			cl.w.Int((at.UnixMilli() + 500) / 1000)
		default:
			cl.w.Int(at.UnixMilli())
		}
	}
}
