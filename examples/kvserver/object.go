package main

import "math"

// OBJECT tells about a key's value what Redis would tell about the same
// string written by SET: Redis keeps a decimal integer of up to 20 bytes
// as an int (sharing one object for 0 to 9999), a string of up to 44 bytes
// embedded in its object (embstr) and a longer one apart (raw).

const (
	// sharedIntegers is Redis's OBJ_SHARED_INTEGERS.
	sharedIntegers = 10000
	// embstrLimit is Redis's OBJ_ENCODING_EMBSTR_SIZE_LIMIT.
	embstrLimit = 44
	// sharedRefcount is what OBJECT REFCOUNT answers for a shared
	// object (Redis's OBJ_SHARED_REFCOUNT, INT_MAX).
	sharedRefcount = math.MaxInt32
)

// encoding returns Redis's encoding of v and whether v is a shared
// integer.
func encoding(v string) (string, bool) {
	if n, ok := parseInt(v); ok {
		return "int", n >= 0 && n < sharedIntegers
	}
	if len(v) <= embstrLimit {
		return "embstr", false
	}
	return "raw", false
}

// objectValue looks up the key of an OBJECT subcommand, answering null for
// a missing key.
func objectValue(s *Server, cl *client, args [][]byte) (string, bool) {
	v, ok := s.db(cl).Get(view(args[2]))
	if !ok {
		cl.w.Null()
	}
	return v, ok
}

func cmdObjectEncoding(s *Server, cl *client, args [][]byte) {
	if v, ok := objectValue(s, cl, args); ok {
		enc, _ := encoding(v)
		cl.w.Bulk(enc)
	}
}

func cmdObjectRefcount(s *Server, cl *client, args [][]byte) {
	if v, ok := objectValue(s, cl, args); ok {
		if _, shared := encoding(v); shared {
			cl.w.Int(sharedRefcount)
		} else {
			cl.w.Int(1)
		}
	}
}

// cmdObjectIdletime answers 0 for a key that exists: kvserver keeps no
// access times (see README).
func cmdObjectIdletime(s *Server, cl *client, args [][]byte) {
	if _, ok := objectValue(s, cl, args); ok {
		cl.w.Int(0)
	}
}

// cmdObjectFreq answers as Redis does under its default maxmemory-policy
// (noeviction, kvserver's only one): frequencies are not tracked.
func cmdObjectFreq(s *Server, cl *client, args [][]byte) {
	if _, ok := objectValue(s, cl, args); ok {
		cl.w.Error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. " +
			"Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
	}
}

// cmdObjectHelp answers OBJECT HELP in Redis's words, whose last line
// alone among the HELP replies says "Prints".
func cmdObjectHelp(s *Server, cl *client, args [][]byte) {
	lines := []string{
		"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"ENCODING <key>",
		"    Return the kind of internal representation used in order to store the value",
		"    associated with a <key>.",
		"FREQ <key>",
		"    Return the access frequency index of the <key>. The returned integer is",
		"    proportional to the logarithm of the recent access frequency of the key.",
		"IDLETIME <key>",
		"    Return the idle time of the <key>, that is the approximated number of",
		"    seconds elapsed since the last access to the key.",
		"REFCOUNT <key>",
		"    Return the number of references of the value associated with the specified",
		"    <key>.",
		"HELP",
		"    Prints this help.",
	}
	cl.w.Array(len(lines))
	for _, l := range lines {
		cl.w.Simple(l)
	}
}
