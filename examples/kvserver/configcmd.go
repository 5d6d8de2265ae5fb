package main

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parameter is one parameter of CONFIG GET and CONFIG SET.
type parameter struct {
	name string
	get  func(s *Server) string
	// set checks a value and returns what applies it, or the reason it
	// is refused; nil for a parameter that cannot change while running.
	set func(s *Server, v string) (apply func(), refused string)
}

// parameters are the settings kvserver has, each telling the truth: what
// CONFIG SET changes takes effect, and the fixed ones (no persistence, no
// memory limit) say what kvserver does.
var parameters = []parameter{
	{name: "appendonly", get: func(*Server) string { return "no" }},
	{name: "databases", get: func(*Server) string { return strconv.Itoa(numDBs) }},
	{
		name: "hz",
		get:  func(s *Server) string { return strconv.FormatInt(s.hz(), 10) },
		set: func(s *Server, v string) (func(), string) {
			n, msg := configInt(v, 0, math.MaxInt32)
			if msg != "" {
				return nil, msg
			}
			// Redis keeps hz within 1..500.
			n = min(max(n, 1), 500)
			return func() { s.setInterval(time.Second / time.Duration(n)) }, ""
		},
	},
	{
		name: "maxclients",
		get:  func(s *Server) string { return strconv.FormatInt(s.maxClients.Load(), 10) },
		set: func(s *Server, v string) (func(), string) {
			n, msg := configInt(v, 1, math.MaxUint32)
			if msg != "" {
				return nil, msg
			}
			return func() { s.maxClients.Store(n) }, ""
		},
	},
	{name: "maxmemory", get: func(*Server) string { return "0" }},
	{
		name: "notify-keyspace-events",
		get:  func(s *Server) string { return formatNotify(int(s.notifyFlags.Load())) },
		set: func(s *Server, v string) (func(), string) {
			flags, ok := parseNotify(v)
			if !ok {
				return nil, "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
			}
			return func() { s.notifyFlags.Store(int32(flags)) }, ""
		},
	},
	{name: "proto-max-bulk-len", get: func(s *Server) string { return strconv.FormatInt(s.cfg.Limits.MaxBulkLen, 10) }},
	{name: "protected-mode", get: func(s *Server) string {
		if s.cfg.DisableProtectedMode {
			return "no"
		}
		return "yes"
	}},
	{name: "save", get: func(*Server) string { return "" }},
}

// configInt parses an integer parameter as Redis does.
func configInt(v string, lo, hi int64) (int64, string) {
	n, ok := parseInt(v)
	if !ok {
		return 0, "argument couldn't be parsed into an integer"
	}
	if n < lo || n > hi {
		return 0, "argument must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10) + " inclusive"
	}
	return n, ""
}

// hz is the expiry cycle's rate, in Redis's terms.
func (s *Server) hz() int64 {
	return max(int64(math.Round(float64(time.Second)/float64(s.interval.Load()))), 1)
}

// setInterval changes the expiry cycle's interval; the cycle takes it at
// its next tick.
func (s *Server) setInterval(d time.Duration) {
	s.interval.Store(int64(d))
	select {
	case s.intervalChanged <- struct{}{}:
	default:
	}
}

// cmdConfigGet answers CONFIG GET pattern [pattern ...]: the parameters
// matching any pattern, as a map in RESP3. An unknown parameter is left
// out, as in Redis.
func cmdConfigGet(s *Server, cl *client, args [][]byte) {
	type pair struct{ name, value string }
	var found []pair
	seen := map[string]bool{}
	for _, a := range args[2:] {
		pat := strings.ToLower(string(a))
		for _, p := range parameters {
			if seen[p.name] {
				continue
			}
			// A name without wildcards is answered with the name as
			// given, as in Redis.
			if !strings.ContainsAny(pat, "*?[") && pat == p.name {
				seen[p.name] = true
				found = append(found, pair{string(a), p.get(s)})
			} else if globMatch(pat, p.name) {
				seen[p.name] = true
				found = append(found, pair{p.name, p.get(s)})
			}
		}
	}
	cl.w.Map(len(found))
	for _, p := range found {
		cl.w.Bulk(p.name)
		cl.w.Bulk(p.value)
	}
}

// cmdConfigSet answers CONFIG SET parameter value [parameter value ...]:
// every value is checked before any is applied, as in Redis 7.
func cmdConfigSet(s *Server, cl *client, args [][]byte) {
	if len(args)%2 != 0 {
		cl.w.Error(errSyntax)
		return
	}
	var applies []func()
	var names []string
	for i := 2; i < len(args); i += 2 {
		name, v := strings.ToLower(string(args[i])), string(args[i+1])
		j := slices.IndexFunc(parameters, func(p parameter) bool { return p.name == name })
		if j < 0 {
			cl.w.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + string(args[i]) + "'")
			return
		}
		failed := func(msg string) {
			cl.w.Error("ERR CONFIG SET failed (possibly related to argument '" + string(args[i]) + "') - " + msg)
		}
		if slices.Contains(names, name) {
			failed("duplicate parameter")
			return
		}
		names = append(names, name)
		if parameters[j].set == nil {
			failed("can't set immutable config")
			return
		}
		apply, msg := parameters[j].set(s, v)
		if msg != "" {
			failed(msg)
			return
		}
		applies = append(applies, apply)
	}
	for _, apply := range applies {
		apply()
	}
	cl.w.Simple("OK")
}

func cmdConfigHelp(s *Server, cl *client, args [][]byte) {
	help(cl, "CONFIG",
		"GET <pattern>",
		"    Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>",
		"    Set the configuration <directive> to <value>.")
}
