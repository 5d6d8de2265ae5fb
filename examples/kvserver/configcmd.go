package main

import (
	"slices"
	"strings"
)

// parameter is one parameter of CONFIG GET and CONFIG SET.
type parameter struct {
	name string
	get  func(s *Server) string
	// set applies a value, or returns the reason it is refused.
	set func(s *Server, v string) string
}

// parameters are the settings kvserver has, by name.
var parameters = []parameter{
	{
		name: "notify-keyspace-events",
		get:  func(s *Server) string { return formatNotify(int(s.notifyFlags.Load())) },
		set: func(s *Server, v string) string {
			flags, ok := parseNotify(v)
			if !ok {
				return "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
			}
			s.notifyFlags.Store(int32(flags))
			return ""
		},
	},
}

// cmdConfigGet answers CONFIG GET pattern [pattern ...]: the parameters
// matching any pattern, as a map in RESP3.
func cmdConfigGet(s *Server, cl *client, args [][]byte) {
	var found []parameter
	for _, p := range parameters {
		for _, a := range args[2:] {
			if globMatch(strings.ToLower(string(a)), p.name) {
				found = append(found, p)
				break
			}
		}
	}
	cl.w.Map(len(found))
	for _, p := range found {
		cl.w.Bulk(p.name)
		cl.w.Bulk(p.get(s))
	}
}

// cmdConfigSet answers CONFIG SET parameter value [parameter value ...]:
// all are checked before any is applied, as in Redis 7.
func cmdConfigSet(s *Server, cl *client, args [][]byte) {
	if len(args)%2 != 0 {
		cl.w.Error(errArity("config|set"))
		return
	}
	var sets []func() string
	var names []string
	for i := 2; i < len(args); i += 2 {
		name, v := strings.ToLower(string(args[i])), string(args[i+1])
		j := slices.IndexFunc(parameters, func(p parameter) bool { return p.name == name })
		if j < 0 {
			cl.w.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + string(args[i]) + "'")
			return
		}
		if slices.Contains(names, name) {
			cl.w.Error("ERR CONFIG SET failed (possibly related to argument '" + string(args[i]) + "') - duplicate parameter")
			return
		}
		names = append(names, name)
		p := parameters[j]
		sets = append(sets, func() string { return p.set(s, v) })
	}
	for i, set := range sets {
		if msg := set(); msg != "" {
			cl.w.Error("ERR CONFIG SET failed (possibly related to argument '" + string(args[2+2*i]) + "') - " + msg)
			return
		}
	}
	cl.w.Simple("OK")
}

func cmdConfigHelp(s *Server, cl *client, args [][]byte) {
	help(cl, "CONFIG",
		"GET <pattern>",
		"    Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>",
		"    Set the configuration <directive> to <value>.",
		"RESETSTAT",
		"    Reset statistics reported by the INFO command.",
		"REWRITE",
		"    Rewrite the configuration file.")
}
