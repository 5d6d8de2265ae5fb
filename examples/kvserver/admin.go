package main

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttlkit/ttlkit/expiry"
)

// version is what HELLO and INFO report as the Redis version this server
// imitates; clients use it to pick features.
const version = "7.0.0"

// cmdHello answers HELLO [protover [AUTH user pass] [SETNAME name]] as
// Redis 7 does: it authenticates, names the client, switches the
// connection to RESP2 or RESP3 and describes the server, in a map. Without
// a protocol version it keeps the connection's.
func cmdHello(s *Server, cl *client, args [][]byte) {
	j := 1
	var ver int64
	if len(args) >= 2 {
		var ok bool
		if ver, ok = parseInt(args[1]); !ok {
			cl.w.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if ver < 2 || ver > 3 {
			cl.w.Error("NOPROTO unsupported protocol version")
			return
		}
		j = 2
	}
	name, setName, user, pass, auth := "", false, "", "", false
	for ; j < len(args); j++ {
		more := len(args) - 1 - j
		switch opt := string(args[j]); {
		case strings.EqualFold(opt, "auth") && more >= 2:
			user, pass, auth = string(args[j+1]), string(args[j+2]), true
			j += 2
		case strings.EqualFold(opt, "setname") && more >= 1:
			j++
			name, setName = string(args[j]), true
		default:
			cl.w.Error("ERR Syntax error in HELLO option '" + opt + "'")
			return
		}
	}
	if auth && !s.authenticate(cl, user, pass) {
		cl.w.Error(errWrongPass)
		return
	}
	if !cl.authed {
		cl.w.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		if !validName(name) {
			cl.w.Error(errClientName)
			return
		}
		cl.name = name
	}
	if ver != 0 {
		cl.w.resp3 = ver == 3
	}
	proto := int64(2)
	if cl.w.resp3 {
		proto = 3
	}
	cl.w.Map(7)
	cl.w.Bulk("server")
	cl.w.Bulk("redis")
	cl.w.Bulk("version")
	cl.w.Bulk(version)
	cl.w.Bulk("proto")
	cl.w.Int(proto)
	cl.w.Bulk("id")
	cl.w.Int(cl.id)
	cl.w.Bulk("mode")
	cl.w.Bulk("standalone")
	cl.w.Bulk("role")
	cl.w.Bulk("master")
	cl.w.Bulk("modules")
	cl.w.Array(0)
}

// errClientName is Redis's answer to a client name with a space or a
// control character.
const errClientName = "ERR Client names cannot contain spaces, newlines or special characters."

// validName reports whether name is a valid client name: printable ASCII
// without spaces.
func validName(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] < '!' || name[i] > '~' {
			return false
		}
	}
	return true
}

// errWrongPass is Redis's answer to credentials that do not match.
const errWrongPass = "WRONGPASS invalid username-password pair or user is disabled."

// errNoPassword is Redis's answer to AUTH <password> when no password is set.
const errNoPassword = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"

// authenticate checks credentials as Redis 6+ does with only the default
// user: without a password configured the default user accepts any
// password; with one (requirepass), only that password. Success marks the
// client authenticated; failure leaves it as it was.
func (s *Server) authenticate(cl *client, user, pass string) bool {
	if user != "default" {
		return false
	}
	if s.cfg.RequirePass != "" {
		// Compare digests, so that the time taken says nothing about
		// the password.
		got, want := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(s.cfg.RequirePass))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return false
		}
	}
	cl.authed = true
	return true
}

// cmdAuth answers AUTH [username] password as Redis does: AUTH <password>
// is the default user's; without a password configured it is refused.
func cmdAuth(s *Server, cl *client, args [][]byte) {
	switch {
	case len(args) > 3:
		cl.w.Error(errSyntax)
	case len(args) == 2 && s.cfg.RequirePass == "":
		cl.w.Error(errNoPassword)
	case len(args) == 2 && s.authenticate(cl, "default", string(args[1])),
		len(args) == 3 && s.authenticate(cl, string(args[1]), string(args[2])):
		cl.w.Simple("OK")
	default:
		cl.w.Error(errWrongPass)
	}
}

func cmdSelect(s *Server, cl *client, args [][]byte) {
	n, ok := parseInt(args[1])
	switch {
	case !ok || n < math.MinInt32 || n > math.MaxInt32:
		cl.w.Error(errNotInteger)
	case n < 0 || n >= int64(len(s.dbs)):
		cl.w.Error("ERR DB index is out of range")
	default:
		cl.db = int(n)
		cl.w.Simple("OK")
	}
}

// cmdDebug answers DEBUG SET-ACTIVE-EXPIRE 0|1, which Redis's own tests
// use to switch active expiry off and on, and DEBUG HELP.
func cmdDebug(s *Server, cl *client, args [][]byte) {
	switch sub := strings.ToLower(string(args[1])); {
	case sub == "set-active-expire" && len(args) == 3:
		n, ok := parseInt(args[2])
		if !ok {
			cl.w.Error(errNotInteger)
			return
		}
		s.activeOff.Store(n == 0)
		cl.w.Simple("OK")
	case sub == "help" && len(args) == 2:
		help(cl, "DEBUG", "SET-ACTIVE-EXPIRE <0|1>", "    Switch active expiry off (0) or on (1).")
	default:
		cl.w.Error("ERR unknown subcommand '" + trunc(string(args[1]), 128) + "'. Try DEBUG HELP.")
	}
}

// cmdTime answers TIME: the server's clock as Unix seconds and the
// microseconds within the second.
func cmdTime(s *Server, cl *client, args [][]byte) {
	now := s.now()
	cl.w.Array(2)
	cl.w.Bulk(strconv.FormatInt(now.Unix(), 10))
	cl.w.Bulk(strconv.Itoa(now.Nanosecond() / 1000))
}

func cmdClientID(s *Server, cl *client, args [][]byte) { cl.w.Int(cl.id) }

func cmdClientGetName(s *Server, cl *client, args [][]byte) {
	if cl.name == "" {
		cl.w.Null()
		return
	}
	cl.w.Bulk(cl.name)
}

func cmdClientSetName(s *Server, cl *client, args [][]byte) {
	name := string(args[2])
	if !validName(name) {
		cl.w.Error(errClientName)
		return
	}
	cl.name = name
	cl.w.Simple("OK")
}

// cmdClientSetInfo accepts CLIENT SETINFO LIB-NAME|LIB-VER value, which
// clients send on connect; the values are not kept.
func cmdClientSetInfo(s *Server, cl *client, args [][]byte) {
	attr := strings.ToLower(string(args[2]))
	if attr != "lib-name" && attr != "lib-ver" {
		cl.w.Error("ERR Unrecognized option '" + string(args[2]) + "'")
		return
	}
	if !validName(string(args[3])) {
		cl.w.Error("ERR " + attr + " cannot contain spaces, newlines or special characters.")
		return
	}
	cl.w.Simple("OK")
}

func cmdClientHelp(s *Server, cl *client, args [][]byte) {
	help(cl, "CLIENT",
		"ID", "    Return the ID of the current connection.",
		"GETNAME", "    Return the name of the current connection.",
		"SETNAME <name>", "    Assign the name <name> to the current connection.",
		"SETINFO <LIB-NAME|LIB-VER> <value>", "    Accept the client library's name or version.",
		"INFO", "    Return information about the current client connection.",
		"LIST [TYPE <NORMAL|PUBSUB>] [ID <id> [<id> ...]]", "    Return information about client connections.",
		"KILL <ip:port>", "    Kill connection made from <ip:port>.",
		"KILL [ID <id>] [ADDR <ip:port>] [SKIPME <YES|NO>]", "    Kill connections matching all the filters given.",
		"NO-EVICT <ON|OFF>", "    Accepted; kvserver evicts no clients.",
		"REPLY <ON|OFF|SKIP>", "    Control the replies sent to the current connection.",
	)
}

func help(cl *client, name string, lines ...string) {
	cl.w.Array(len(lines) + 3)
	cl.w.Simple(name + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		cl.w.Simple(l)
	}
	cl.w.Simple("HELP")
	cl.w.Simple("    Print this help.")
}

// sortedCommands returns the top-level commands by name.
func sortedCommands() []*command {
	cs := make([]*command, 0, len(commands))
	for _, c := range commands {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return cs
}

// COMMAND and COMMAND INFO write Redis 7's 10-field entries (name, arity,
// flags, first key, last key, step, ACL categories, tips, key
// specifications, subcommands), taken from Redis itself.
func cmdCommand(s *Server, cl *client, args [][]byte) {
	cs := sortedCommands()
	cl.w.Array(len(cs))
	for _, c := range cs {
		cl.w.Raw(commandInfo(cl, c))
	}
}

// commandInfo returns c's COMMAND INFO entry in the client's protocol.
func commandInfo(cl *client, c *command) string {
	if cl.w.resp3 {
		return redisCommandInfo3[c.name]
	}
	return redisCommandInfo[c.name]
}

func cmdCommandCount(s *Server, cl *client, args [][]byte) { cl.w.Int(int64(len(commands))) }

func cmdCommandInfo(s *Server, cl *client, args [][]byte) {
	if len(args) == 2 {
		cmdCommand(s, cl, args)
		return
	}
	cl.w.Array(len(args) - 2)
	for _, a := range args[2:] {
		if c := lookupCommand(commands, a); c != nil {
			cl.w.Raw(commandInfo(cl, c))
		} else {
			cl.w.Null()
		}
	}
}

// cmdCommandDocs answers COMMAND DOCS [name ...] with Redis 7's
// documentation map (a flat array of name and docs in RESP2); unknown names
// are left out, as Redis does.
func cmdCommandDocs(s *Server, cl *client, args [][]byte) {
	var cs []*command
	if len(args) == 2 {
		cs = sortedCommands()
	} else {
		for _, a := range args[2:] {
			if c := lookupCommand(commands, a); c != nil {
				cs = append(cs, c)
			}
		}
	}
	cl.w.Map(len(cs))
	for _, c := range cs {
		cl.w.Bulk(c.name)
		if cl.w.resp3 {
			cl.w.Raw(redisCommandDocs3[c.name])
		} else {
			cl.w.Raw(redisCommandDocs[c.name])
		}
	}
}

func cmdCommandList(s *Server, cl *client, args [][]byte) {
	cs := sortedCommands()
	cl.w.Array(len(cs))
	for _, c := range cs {
		cl.w.Bulk(c.name)
	}
}

func cmdCommandHelp(s *Server, cl *client, args [][]byte) {
	help(cl, "COMMAND",
		"(no subcommand)", "    Return details about all commands.",
		"COUNT", "    Return the total number of commands in this server.",
		"LIST", "    Return a list of all commands in this server.",
		"INFO [<command-name> ...]", "    Return details about the given commands, or all of them.",
		"DOCS [<command-name> ...]", "    Return documentation details about the given commands, or all of them.",
	)
}

// infoSections are INFO's sections in order; "default", "all" and
// "everything" select them all.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "keyspace", "expiry"}

// cmdInfo answers INFO [section ...] with Redis's "# Section" and
// "field:value" lines, the fields that tools such as redis-cli --stat
// read. The expiry section reports the keyspace's Stats and the active
// expiry tuning.
func cmdInfo(s *Server, cl *client, args [][]byte) {
	want := make(map[string]bool)
	for _, a := range args[1:] {
		switch sec := strings.ToLower(string(a)); sec {
		case "default", "all", "everything":
			for _, n := range infoSections {
				want[n] = true
			}
			// As in Redis, only all and everything add commandstats.
			want["commandstats"] = want["commandstats"] || sec != "default"
		default:
			want[sec] = true
		}
	}
	all := len(args) == 1
	var b strings.Builder
	section := func(name string, fields func()) {
		if !all && !want[name] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(name[:1]) + name[1:] + "\r\n")
		fields()
	}
	field := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }

	section("server", func() {
		field("redis_version", version)
		field("redis_mode", "standalone")
		field("os", runtime.GOOS+" "+runtime.GOARCH)
		field("arch_bits", 64)
		field("go_version", runtime.Version())
		field("process_id", pid)
		field("tcp_port", s.port())
		field("uptime_in_seconds", int64(time.Since(s.start)/time.Second))
		field("hz", s.hz())
	})
	section("clients", func() {
		s.connMu.Lock()
		n := len(s.conns)
		s.connMu.Unlock()
		field("connected_clients", n)
		field("maxclients", s.maxClients.Load())
		field("blocked_clients", 0)
	})
	section("memory", func() {
		heap, rss := memoryUse()
		field("used_memory", heap)
		field("used_memory_human", humanBytes(heap))
		field("used_memory_rss", rss)
		field("used_memory_rss_human", humanBytes(rss))
		field("maxmemory", 0)
		field("maxmemory_policy", "noeviction")
		field("mem_allocator", "go-"+runtime.Version())
	})
	section("persistence", func() {
		field("loading", 0)
		field("rdb_bgsave_in_progress", 0)
		field("aof_enabled", 0)
		field("aof_rewrite_in_progress", 0)
	})
	var sts [numDBs]expiry.Stats
	var expired uint64
	for i, db := range s.dbs {
		sts[i] = db.Stats()
		expired += sts[i].ExpiredPassive + sts[i].ExpiredActive
	}
	section("stats", func() {
		field("total_connections_received", s.connections.Load())
		field("total_commands_processed", s.commands.Load())
		field("expired_keys", expired+s.expiredOnSet.Load())
		field("evicted_keys", 0)
	})
	section("replication", func() {
		field("role", "master")
		field("connected_slaves", 0)
	})
	section("keyspace", func() {
		for i, st := range sts {
			if st.Keys > 0 {
				field(fmt.Sprint("db", i), fmt.Sprintf("keys=%d,expires=%d,avg_ttl=%d",
					st.Keys, st.KeysWithDeadline, st.AvgTTL.Milliseconds()))
			}
		}
	})
	section("expiry", func() { s.expiryInfo(field, sts) })
	if want["commandstats"] {
		section("commandstats", func() { s.commandStats(field) })
	}
	cl.w.Verbatim(b.String())
}

var pid = os.Getpid()

// humanBytes formats n as Redis's used_memory_human does.
func humanBytes(n uint64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	}
}

// expiryInfo writes INFO's expiry section: the tuning of active expiry and
// the keyspaces' expiry.Stats, summed over the databases.
func (s *Server) expiryInfo(field func(string, any), sts [numDBs]expiry.Stats) {
	var st expiry.Stats
	for _, x := range sts {
		st.Keys += x.Keys
		st.KeysWithDeadline += x.KeysWithDeadline
		st.ExpiredPassive += x.ExpiredPassive
		st.ExpiredActive += x.ExpiredActive
		st.Cycles += x.Cycles
		st.Rounds += x.Rounds
		st.Sampled += x.Sampled
		st.BudgetHits += x.BudgetHits
		st.StaleEstimate = max(st.StaleEstimate, x.StaleEstimate)
		st.LastCycle = max(st.LastCycle, x.LastCycle)
	}
	o := s.expiry
	base := cmp.Or(s.cfg.Expiry.Interval, time.Second) // what Budget is a share of
	if base < 0 {
		base = time.Second
	}
	field("interval_ms", time.Duration(s.interval.Load()).Milliseconds())
	field("sample_size", cmp.Or(o.SampleSize, 20))
	field("threshold", o.Threshold)
	field("budget", float64(o.Budget)/float64(base))
	field("keys", st.Keys)
	field("keys_with_deadline", st.KeysWithDeadline)
	field("expired_passive", st.ExpiredPassive)
	field("expired_active", st.ExpiredActive)
	field("cycles", st.Cycles)
	field("rounds", st.Rounds)
	field("sampled", st.Sampled)
	field("budget_hits", st.BudgetHits)
	field("stale_estimate", strconv.FormatFloat(st.StaleEstimate, 'f', 4, 64))
	field("last_cycle_us", st.LastCycle.Microseconds())
}
