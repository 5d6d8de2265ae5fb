package main

import "strings"

// entryOverhead estimates what the keyspace spends on a key besides its
// bytes: the Map's node (key and value headers, deadline, links) and its
// share of the index, about what INFO's used_memory grows by per small key.
const entryOverhead = 80

// cmdMemoryUsage answers MEMORY USAGE key [SAMPLES n]: an estimate of the
// bytes the key and its value take, or null for a missing key.
func cmdMemoryUsage(s *Server, cl *client, args [][]byte) {
	if len(args) != 3 && (len(args) != 5 || !strings.EqualFold(string(args[3]), "samples")) {
		cl.w.Error(errSyntax)
		return
	}
	if len(args) == 5 {
		if _, ok := parseInt(args[4]); !ok {
			cl.w.Error(errNotInteger)
			return
		}
	}
	v, ok := s.db(cl).Get(view(args[2]))
	if !ok {
		cl.w.Null()
		return
	}
	cl.w.Int(int64(len(args[2]) + len(v) + entryOverhead))
}

func cmdMemoryHelp(s *Server, cl *client, args [][]byte) {
	help(cl, "MEMORY",
		"USAGE <key> [SAMPLES <count>]",
		"    Return memory in bytes used by <key> and its value.")
}

// cmdFunctionFlush answers FUNCTION FLUSH [ASYNC|SYNC]: kvserver has no
// functions, so there is nothing to delete.
func cmdFunctionFlush(s *Server, cl *client, args [][]byte) {
	if len(args) > 3 || (len(args) == 3 && !strings.EqualFold(string(args[2]), "async") &&
		!strings.EqualFold(string(args[2]), "sync")) {
		cl.w.Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
		return
	}
	cl.w.Simple("OK")
}

func cmdFunctionHelp(s *Server, cl *client, args [][]byte) {
	help(cl, "FUNCTION",
		"FLUSH [ASYNC|SYNC]",
		"    Delete all the libraries (kvserver has none).")
}
