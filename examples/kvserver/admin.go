package main

import (
	"cmp"
	"fmt"
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

// cmdHello answers HELLO for RESP2 only. A client asking for RESP3 gets the
// NOPROTO error that Redis gives for a protocol it does not speak, which
// makes clients such as go-redis fall back to RESP2.
func cmdHello(s *Server, cl *client, args [][]byte) {
	j := 1
	if len(args) >= 2 {
		ver, ok := parseInt(args[1])
		if !ok {
			cl.w.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if ver != 2 {
			cl.w.Error("NOPROTO unsupported protocol version")
			return
		}
		j = 2
	}
	name, setName, user, auth := "", false, "", false
	for ; j < len(args); j++ {
		more := len(args) - 1 - j
		switch opt := string(args[j]); {
		case strings.EqualFold(opt, "auth") && more >= 2:
			user, auth = string(args[j+1]), true
			j += 2
		case strings.EqualFold(opt, "setname") && more >= 1:
			j++
			name, setName = string(args[j]), true
			if !validName(name) {
				cl.w.Error("ERR Client names cannot contain spaces, newlines or special characters.")
				return
			}
		default:
			cl.w.Error("ERR Syntax error in HELLO option '" + opt + "'")
			return
		}
	}
	// No password is configured: as with Redis's default user with nopass,
	// the default user gets in with any password, and no other user exists.
	if auth && user != "default" {
		cl.w.Error(errWrongPass)
		return
	}
	if setName {
		cl.name = name
	}
	cl.w.Array(14)
	cl.w.Bulk("server")
	cl.w.Bulk("redis")
	cl.w.Bulk("version")
	cl.w.Bulk(version)
	cl.w.Bulk("proto")
	cl.w.Int(2)
	cl.w.Bulk("id")
	cl.w.Int(cl.id)
	cl.w.Bulk("mode")
	cl.w.Bulk("standalone")
	cl.w.Bulk("role")
	cl.w.Bulk("master")
	cl.w.Bulk("modules")
	cl.w.Array(0)
}

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

// errWrongPass is Redis's answer to credentials of a user that does not
// exist.
const errWrongPass = "WRONGPASS invalid username-password pair or user is disabled."

// errNoPassword is Redis's answer to AUTH <password> when no password is set.
const errNoPassword = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"

// cmdAuth answers AUTH as Redis does when no password is configured: the
// password-only form is refused, the default user accepts any password.
func cmdAuth(s *Server, cl *client, args [][]byte) {
	switch {
	case len(args) > 3:
		cl.w.Error(errSyntax)
	case len(args) == 2:
		cl.w.Error(errNoPassword)
	case string(args[1]) == "default":
		cl.w.Simple("OK")
	default:
		cl.w.Error(errWrongPass)
	}
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
		cl.w.Error("ERR Client names cannot contain spaces, newlines or special characters.")
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

// writeCommandInfo writes the 7-element COMMAND entry of Redis 6 (name,
// arity, flags, first key, last key, step, ACL categories), which clients
// parse as well as Redis 7's 10 elements.
func writeCommandInfo(cl *client, c *command) {
	cl.w.Array(7)
	cl.w.Bulk(c.name)
	cl.w.Int(int64(c.arity))
	cl.w.Array(len(c.flags))
	for _, f := range c.flags {
		cl.w.Simple(f)
	}
	cl.w.Int(int64(c.first))
	cl.w.Int(int64(c.last))
	cl.w.Int(int64(c.step))
	cl.w.Array(0)
}

func cmdCommand(s *Server, cl *client, args [][]byte) {
	cs := sortedCommands()
	cl.w.Array(len(cs))
	for _, c := range cs {
		writeCommandInfo(cl, c)
	}
}

func cmdCommandCount(s *Server, cl *client, args [][]byte) { cl.w.Int(int64(len(commands))) }

func cmdCommandInfo(s *Server, cl *client, args [][]byte) {
	if len(args) == 2 {
		cmdCommand(s, cl, args)
		return
	}
	cl.w.Array(len(args) - 2)
	for _, a := range args[2:] {
		if c := commands[strings.ToLower(string(a))]; c != nil {
			writeCommandInfo(cl, c)
		} else {
			cl.w.Null()
		}
	}
}

// cmdCommandDocs answers with no documentation; redis-cli then uses its
// built-in hints.
func cmdCommandDocs(s *Server, cl *client, args [][]byte) { cl.w.Array(0) }

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
		"DOCS [<command-name> ...]", "    Return documentation (none is kept).",
	)
}

// infoSections are INFO's sections in order; "default", "all" and
// "everything" select them all.
var infoSections = []string{"server", "clients", "stats", "keyspace", "expiry"}

// cmdInfo answers INFO [section ...] with Redis's "# Section" and
// "field:value" lines. The expiry section reports the keyspace's Stats and
// the active expiry tuning.
func cmdInfo(s *Server, cl *client, args [][]byte) {
	want := make(map[string]bool)
	for _, a := range args[1:] {
		switch sec := strings.ToLower(string(a)); sec {
		case "default", "all", "everything":
			for _, n := range infoSections {
				want[n] = true
			}
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
		field("go_version", runtime.Version())
		field("process_id", pid)
		field("uptime_in_seconds", int64(time.Since(s.start)/time.Second))
	})
	section("clients", func() {
		s.connMu.Lock()
		n := len(s.conns)
		s.connMu.Unlock()
		field("connected_clients", n)
	})
	st := s.db.Stats()
	section("stats", func() {
		field("total_connections_received", s.connections.Load())
		field("total_commands_processed", s.commands.Load())
		field("expired_keys", st.ExpiredPassive+st.ExpiredActive)
	})
	section("keyspace", func() {
		if st.Keys > 0 {
			field("db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", st.Keys, st.KeysWithDeadline))
		}
	})
	section("expiry", func() { s.expiryInfo(field, st) })
	cl.w.Bulk(b.String())
}

var pid = os.Getpid()

// expiryInfo writes INFO's expiry section: the tuning of active expiry and
// the keyspace's expiry.Stats.
func (s *Server) expiryInfo(field func(string, any), st expiry.Stats) {
	o := s.cfg.Expiry
	field("interval_ms", cmp.Or(o.Interval, expiry.DefaultInterval).Milliseconds())
	field("sample_size", cmp.Or(o.SampleSize, expiry.DefaultSampleSize))
	field("threshold", cmp.Or(o.Threshold, expiry.DefaultThreshold))
	field("budget", cmp.Or(o.Budget, expiry.DefaultBudget))
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
