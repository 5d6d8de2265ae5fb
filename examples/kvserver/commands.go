package main

import (
	"strings"
	"time"
	"unsafe"
)

// Error replies, worded as Redis 7 words them.
const (
	errSyntax     = "ERR syntax error"
	errNotInteger = "ERR value is not an integer or out of range"
	errNoAuth     = "NOAUTH Authentication required."
)

func errArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

func errExpireTime(name string) string {
	return "ERR invalid expire time in '" + name + "' command"
}

// locking says how a command holds the server's keyspace lock.
//
// Every single-key command is one atomic operation of the expiry.Map (a
// lookup, a store, a delete), so those commands share the lock and run in
// parallel. A command that reads and then writes (SET NX, SET GET, GETDEL,
// EXPIRE GT), or touches several keys (MGET, MSET, DEL of several keys,
// KEYS, FLUSHALL), holds it exclusively, so that it is atomic as in Redis,
// which runs one command at a time.
type locking int

const (
	lockNone      locking = iota // touches no keys
	lockShared                   // one atomic operation on one key
	lockExclusive                // reads then writes, or several keys
)

// command is one entry of the command table. What COMMAND INFO and COMMAND
// DOCS report comes from Redis itself (redis_commands.go).
type command struct {
	name    string // lower case, "container|sub" for subcommands
	arity   int    // n: exactly n arguments with the name; -n: at least n
	lock    locking
	lockFor func(args [][]byte) locking // overrides lock when set
	handler func(s *Server, cl *client, args [][]byte)
	noAuth  bool // allowed before AUTH
	// now: runs at once inside MULTI instead of being queued (EXEC,
	// DISCARD, MULTI, WATCH, QUIT).
	now  bool
	subs map[string]*command
	// idx is the command's place in Server.stats.
	idx int
}

var commands map[string]*command

// numCommands counts the commands and subcommands.
var numCommands int

func init() {
	table := []*command{
		{name: "ping", arity: -1, handler: cmdPing},
		{name: "echo", arity: 2, handler: cmdEcho},
		{name: "quit", arity: -1, handler: cmdQuit, noAuth: true, now: true},
		{name: "multi", arity: 1, handler: cmdMulti, now: true},
		{name: "exec", arity: 1, lock: lockExclusive, handler: cmdExec, now: true},
		{name: "discard", arity: 1, handler: cmdDiscard, now: true},
		{name: "watch", arity: -2, lock: lockExclusive, handler: cmdWatch, now: true},
		{name: "unwatch", arity: 1, handler: cmdUnwatch},
		{name: "select", arity: 2, handler: cmdSelect},
		{name: "hello", arity: -1, handler: cmdHello, noAuth: true},
		{name: "auth", arity: -2, handler: cmdAuth, noAuth: true},
		{name: "info", arity: -1, handler: cmdInfo},
		{name: "time", arity: 1, handler: cmdTime},
		{name: "debug", arity: -2, handler: cmdDebug},
		{name: "dbsize", arity: 1, lock: lockExclusive, handler: cmdDBSize},
		{name: "flushdb", arity: -1, lock: lockExclusive, handler: cmdFlushDB},
		{name: "flushall", arity: -1, lock: lockExclusive, handler: cmdFlushAll},
		{name: "get", arity: 2, lock: lockShared, handler: cmdGet},
		{name: "strlen", arity: 2, lock: lockShared, handler: cmdStrlen},
		{name: "type", arity: 2, lock: lockShared, handler: cmdType},
		{name: "set", arity: -3, lockFor: setLocking, handler: cmdSet},
		{name: "setex", arity: 4, lock: lockShared, handler: setexCommand("setex", unitSeconds)},
		{name: "psetex", arity: 4, lock: lockShared, handler: setexCommand("psetex", unitMillis)},
		{name: "getex", arity: -2, lockFor: getexLocking, handler: cmdGetEx},
		{name: "getdel", arity: 2, lock: lockShared, handler: cmdGetDel},
		{name: "incr", arity: 2, lock: lockExclusive, handler: cmdIncr},
		{name: "decr", arity: 2, lock: lockExclusive, handler: cmdDecr},
		{name: "incrby", arity: 3, lock: lockExclusive, handler: cmdIncrBy},
		{name: "decrby", arity: 3, lock: lockExclusive, handler: cmdDecrBy},
		{name: "incrbyfloat", arity: 3, lock: lockExclusive, handler: cmdIncrByFloat},
		{name: "setnx", arity: 3, lock: lockExclusive, handler: cmdSetNX},
		{name: "getset", arity: 3, lock: lockExclusive, handler: cmdGetSet},
		{name: "msetnx", arity: -3, lock: lockExclusive, handler: cmdMSetNX},
		{name: "append", arity: 3, lock: lockExclusive, handler: cmdAppend},
		{name: "setrange", arity: 4, lock: lockExclusive, handler: cmdSetRange},
		{name: "getrange", arity: 4, lock: lockShared, handler: cmdGetRange},
		{name: "substr", arity: 4, lock: lockShared, handler: cmdGetRange},
		{name: "rename", arity: 3, lock: lockExclusive, handler: renameCommand(false)},
		{name: "renamenx", arity: 3, lock: lockExclusive, handler: renameCommand(true)},
		{name: "copy", arity: -3, lock: lockExclusive, handler: cmdCopy},
		{name: "move", arity: 3, lock: lockExclusive, handler: cmdMove},
		{name: "randomkey", arity: 1, lock: lockExclusive, handler: cmdRandomKey},
		{name: "touch", arity: -2, lockFor: oneKeyShared, handler: cmdTouch},
		{name: "unlink", arity: -2, lockFor: oneKeyShared, handler: cmdDel},
		{name: "mget", arity: -2, lock: lockExclusive, handler: cmdMGet},
		{name: "mset", arity: -3, lock: lockExclusive, handler: cmdMSet},
		{name: "del", arity: -2, lockFor: oneKeyShared, handler: cmdDel},
		{name: "exists", arity: -2, lockFor: oneKeyShared, handler: cmdExists},
		{name: "keys", arity: 2, lock: lockExclusive, handler: cmdKeys},
		{name: "scan", arity: -2, lock: lockExclusive, handler: cmdScan},
		{name: "expire", arity: -3, lockFor: expireLocking, handler: expireCommand(unitSeconds, true)},
		{name: "pexpire", arity: -3, lockFor: expireLocking, handler: expireCommand(unitMillis, true)},
		{name: "expireat", arity: -3, lockFor: expireLocking, handler: expireCommand(unitSeconds, false)},
		{name: "pexpireat", arity: -3, lockFor: expireLocking, handler: expireCommand(unitMillis, false)},
		{name: "ttl", arity: 2, lock: lockShared, handler: ttlCommand(unitSeconds)},
		{name: "pttl", arity: 2, lock: lockShared, handler: ttlCommand(unitMillis)},
		{name: "expiretime", arity: 2, lock: lockShared, handler: expireTimeCommand(unitSeconds)},
		{name: "pexpiretime", arity: 2, lock: lockShared, handler: expireTimeCommand(unitMillis)},
		{name: "persist", arity: 2, lock: lockShared, handler: cmdPersist},
		{name: "lcs", arity: -3, lock: lockExclusive, handler: cmdLCS},
		{name: "dump", arity: 2, lock: lockShared, handler: cmdDump},
		{name: "restore", arity: -4, lock: lockExclusive, handler: cmdRestore},
		{name: "migrate", arity: -6, lock: lockExclusive, handler: cmdMigrate},
		{name: "sort", arity: -2, lock: lockExclusive, handler: sortCommand(false)},
		{name: "sort_ro", arity: -2, lock: lockShared, handler: sortCommand(true)},
		{name: "wait", arity: 3, handler: cmdWait},
		{name: "object", arity: -2, subs: subcommands(
			&command{name: "encoding", arity: 3, lock: lockShared, handler: cmdObjectEncoding},
			&command{name: "freq", arity: 3, lock: lockShared, handler: cmdObjectFreq},
			&command{name: "idletime", arity: 3, lock: lockShared, handler: cmdObjectIdletime},
			&command{name: "refcount", arity: 3, lock: lockShared, handler: cmdObjectRefcount},
			&command{name: "help", arity: 2, handler: cmdObjectHelp},
		)},
		{name: "subscribe", arity: -2, handler: subscribeCommand(false)},
		{name: "psubscribe", arity: -2, handler: subscribeCommand(true)},
		{name: "unsubscribe", arity: -1, handler: unsubscribeCommand(false)},
		{name: "punsubscribe", arity: -1, handler: unsubscribeCommand(true)},
		{name: "publish", arity: 3, handler: cmdPublish},
		{name: "pubsub", arity: -2, subs: subcommands(
			&command{name: "channels", arity: -2, handler: cmdPubsubChannels},
			&command{name: "numsub", arity: -2, handler: cmdPubsubNumsub},
			&command{name: "numpat", arity: 2, handler: cmdPubsubNumpat},
			&command{name: "help", arity: 2, handler: cmdPubsubHelp},
		)},
		{name: "memory", arity: -2, subs: subcommands(
			&command{name: "usage", arity: -3, lock: lockShared, handler: cmdMemoryUsage},
			&command{name: "help", arity: 2, handler: cmdMemoryHelp},
		)},
		{name: "function", arity: -2, subs: subcommands(
			&command{name: "flush", arity: -2, handler: cmdFunctionFlush},
			&command{name: "help", arity: 2, handler: cmdFunctionHelp},
		)},
		{name: "config", arity: -2, subs: subcommands(
			&command{name: "get", arity: -3, handler: cmdConfigGet},
			&command{name: "set", arity: -4, handler: cmdConfigSet},
			&command{name: "help", arity: 2, handler: cmdConfigHelp},
		)},
		{name: "command", arity: -1, handler: cmdCommand, subs: subcommands(
			&command{name: "count", arity: 2, handler: cmdCommandCount},
			&command{name: "info", arity: -2, handler: cmdCommandInfo},
			&command{name: "docs", arity: -2, handler: cmdCommandDocs},
			&command{name: "list", arity: -2, handler: cmdCommandList},
			&command{name: "help", arity: 2, handler: cmdCommandHelp},
		)},
		{name: "client", arity: -2, subs: subcommands(
			&command{name: "id", arity: 2, handler: cmdClientID},
			&command{name: "getname", arity: 2, handler: cmdClientGetName},
			&command{name: "setname", arity: 3, handler: cmdClientSetName},
			&command{name: "setinfo", arity: 4, handler: cmdClientSetInfo},
			&command{name: "list", arity: -2, handler: cmdClientList},
			&command{name: "info", arity: 2, handler: cmdClientInfo},
			&command{name: "kill", arity: -3, handler: cmdClientKill},
			&command{name: "no-evict", arity: 3, handler: cmdClientNoEvict},
			&command{name: "reply", arity: 3, handler: cmdClientReply},
			&command{name: "help", arity: 2, handler: cmdClientHelp},
		)},
	}
	commands = make(map[string]*command, len(table))
	for _, c := range table {
		commands[c.name] = c
		c.idx = numCommands
		numCommands++
		for _, sub := range c.subs {
			sub.name = c.name + "|" + sub.name
			sub.idx = numCommands
			numCommands++
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

// lookupCommand finds a command by name, case-insensitively, without
// allocating for names of up to 32 bytes.
func lookupCommand(m map[string]*command, name []byte) *command {
	var lower [32]byte
	if len(name) > len(lower) {
		return m[strings.ToLower(string(name))]
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return m[string(lower[:len(name)])]
}

// dispatch runs one command and writes its reply, or queues it inside
// MULTI.
func (s *Server) dispatch(cl *client, args [][]byte) {
	cmd := lookupCommand(commands, args[0])
	cl.cur = cmd
	if cmd == nil {
		s.reject(cl, nil, unknownCommand(args))
		return
	}
	if cmd.subs != nil && len(args) >= 2 {
		sub := lookupCommand(cmd.subs, args[1])
		if sub != nil {
			cl.cur = sub
		}
		if sub == nil {
			s.reject(cl, cmd, "ERR unknown subcommand '"+trunc(string(args[1]), 128)+"'. Try "+
				strings.ToUpper(string(args[0]))+" HELP.")
			return
		}
		cmd = sub
	}
	if !cl.authed && !cmd.noAuth && s.cfg.RequirePass != "" {
		s.reject(cl, cmd, errNoAuth)
		return
	}
	if n := len(args); (cmd.arity > 0 && n != cmd.arity) || n < -cmd.arity {
		s.reject(cl, cmd, errArity(cmd.name))
		return
	}
	if subscribeMode(cl, cmd) {
		s.reject(cl, cmd, "ERR Can't execute '"+cmd.name+"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
		return
	}
	if cl.txn.multi && !cmd.now {
		cl.queue(cmd, args)
		return
	}
	lock := cmd.lock
	if cmd.lockFor != nil {
		lock = cmd.lockFor(args)
	}
	switch lock {
	case lockShared:
		l := &s.locks[cl.id%int64(len(s.locks))]
		l.RLock()
		defer l.RUnlock()
	case lockExclusive:
		s.lockAll()
		defer s.unlockAll()
	}
	s.call(cmd, cl, args)
}

// reject answers a command that cannot run with msg; inside MULTI, it also
// makes EXEC abort, as in Redis. An EXEC that cannot run ends the
// transaction at once, saying why.
func (s *Server) reject(cl *client, cmd *command, msg string) {
	if cmd != nil {
		s.stats[cmd.idx].of(cl).rejected.Add(1)
	}
	if cmd != nil && cmd.name == "exec" {
		s.endMulti(cl)
		cl.w.Error("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(msg, "ERR "))
		return
	}
	if cl.txn.multi {
		cl.txn.failed = true
	}
	cl.w.Error(msg)
}

// lockAll takes every shard of the keyspace lock, in order.
func (s *Server) lockAll() {
	for i := range s.locks {
		s.locks[i].Lock()
	}
}

func (s *Server) unlockAll() {
	for i := range s.locks {
		s.locks[i].Unlock()
	}
}

func oneKeyShared(args [][]byte) locking {
	if len(args) == 2 {
		return lockShared
	}
	return lockExclusive
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

// view returns b as a string without copying, for lookups: the keyspace
// never keeps a key it is only asked about, and b is valid until the next
// command is read.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// own returns a key and a value that the keyspace may keep, in one
// allocation (a value the reader already gave an allocation of its own is
// kept as it is).
func own(cl *client, key []byte, vi int, val []byte) (string, string) {
	if !cl.txn.execing && cl.r.Owned(vi) {
		return string(key), view(val)
	}
	if len(key)+len(val) == 0 {
		return "", ""
	}
	kv := make([]byte, len(key)+len(val))
	copy(kv, key)
	copy(kv[len(key):], val)
	k, v := "", ""
	if len(key) > 0 {
		k = unsafe.String(&kv[0], len(key))
	}
	if len(val) > 0 {
		v = unsafe.String(&kv[len(key)], len(val))
	}
	return k, v
}

func cmdPing(s *Server, cl *client, args [][]byte) {
	if len(args) <= 2 && !cl.w.resp3 && cl.subscribed() > 0 {
		pingSubscribed(cl, args)
		return
	}
	switch len(args) {
	case 1:
		cl.w.Simple("PONG")
	case 2:
		cl.w.BulkBytes(args[1])
	default:
		cl.w.Error(errArity("ping"))
	}
}

func cmdEcho(s *Server, cl *client, args [][]byte) { cl.w.BulkBytes(args[1]) }

func cmdQuit(s *Server, cl *client, args [][]byte) {
	cl.w.Simple("OK")
	cl.quit = true
}

func cmdGet(s *Server, cl *client, args [][]byte) {
	if v, ok := s.db(cl).Get(view(args[1])); ok {
		cl.w.Bulk(v)
	} else {
		cl.w.Null()
	}
}

func cmdStrlen(s *Server, cl *client, args [][]byte) {
	v, _ := s.db(cl).Get(view(args[1]))
	cl.w.Int(int64(len(v)))
}

func cmdType(s *Server, cl *client, args [][]byte) {
	if _, ok := s.db(cl).Deadline(view(args[1])); ok {
		cl.w.Simple("string")
	} else {
		cl.w.Simple("none")
	}
}

func cmdGetDel(s *Server, cl *client, args [][]byte) {
	v, ok := s.db(cl).Delete(view(args[1]))
	if !ok {
		cl.w.Null()
		return
	}
	cl.w.Bulk(v)
	s.freed(len(v))
	s.modified(cl, view(args[1]))
	s.notify(notifyGeneric, "del", cl.db, view(args[1]))
}

func cmdMGet(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	cl.w.Array(len(args) - 1)
	for _, k := range args[1:] {
		if v, ok := db.Get(view(k)); ok {
			cl.w.Bulk(v)
		} else {
			cl.w.Null()
		}
	}
}

func cmdMSet(s *Server, cl *client, args [][]byte) {
	if len(args)%2 != 1 {
		cl.w.Error(errArity("mset"))
		return
	}
	db := s.db(cl)
	for i := 1; i < len(args); i += 2 {
		k, v := own(cl, args[i], i+1, args[i+1])
		db.Set(k, v, time.Time{})
		s.modified(cl, k)
		s.notify(notifyString, "set", cl.db, k)
	}
	cl.w.Simple("OK")
}

func cmdDel(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	var n int64
	for _, k := range args[1:] {
		if v, ok := db.Delete(view(k)); ok {
			n++
			s.freed(len(v))
			s.modified(cl, view(k))
			s.notify(notifyGeneric, "del", cl.db, view(k))
		}
	}
	cl.w.Int(n)
}

func cmdExists(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	var n int64
	for _, k := range args[1:] {
		if _, ok := db.Deadline(view(k)); ok {
			n++
		}
	}
	cl.w.Int(n)
}

func cmdPersist(s *Server, cl *client, args [][]byte) {
	if persist(s.db(cl), view(args[1])) {
		s.modified(cl, view(args[1]))
		s.notify(notifyGeneric, "persist", cl.db, view(args[1]))
		cl.w.Int(1)
	} else {
		cl.w.Int(0)
	}
}

func cmdDBSize(s *Server, cl *client, args [][]byte) { cl.w.Int(int64(s.db(cl).Len())) }

// flushArgs accepts FLUSHDB and FLUSHALL's optional SYNC or ASYNC.
func flushArgs(cl *client, args [][]byte) bool {
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "sync") &&
		!strings.EqualFold(string(args[1]), "async")) {
		cl.w.Error(errSyntax)
		return false
	}
	return true
}

func cmdFlushDB(s *Server, cl *client, args [][]byte) {
	if flushArgs(cl, args) {
		s.flushed(cl.db)
		s.db(cl).Clear()
		s.bigFreed.Add(returnThreshold)
		cl.w.Simple("OK")
	}
}

func cmdFlushAll(s *Server, cl *client, args [][]byte) {
	if flushArgs(cl, args) {
		for i, db := range s.dbs {
			s.flushed(i)
			db.Clear()
		}
		s.bigFreed.Add(returnThreshold)
		cl.w.Simple("OK")
	}
}
