package main

import (
	"strconv"
	"strings"
)

// cmdKeys answers KEYS pattern with every live key that matches, in no
// particular order; expired keys met on the way are deleted.
func cmdKeys(s *Server, cl *client, args [][]byte) {
	pat := string(args[1])
	var keys []string
	s.db(cl).Range(func(k, _ string) bool {
		if pat == "*" || globMatch(pat, k) {
			keys = append(keys, k)
		}
		return true
	})
	cl.w.Array(len(keys))
	for _, k := range keys {
		cl.w.Bulk(k)
	}
}

// cmdScan answers SCAN cursor [MATCH pattern] [COUNT n] [TYPE type] with
// Redis's guarantee: a key present during the whole iteration is returned
// at least once. The cursor is the keyspace's own (expiry.Map.Scan).
func cmdScan(s *Server, cl *client, args [][]byte) {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		cl.w.Error("ERR invalid cursor")
		return
	}
	count, pat, typ := 10, "", ""
	for j := 2; j < len(args); j += 2 {
		if j+1 >= len(args) {
			cl.w.Error(errSyntax)
			return
		}
		switch strings.ToLower(string(args[j])) {
		case "count":
			n, ok := parseInt(args[j+1])
			if !ok {
				cl.w.Error(errNotInteger)
				return
			}
			if n < 1 {
				cl.w.Error(errSyntax)
				return
			}
			count = int(min(n, 1<<30))
		case "match":
			pat = string(args[j+1])
		case "type":
			typ = strings.ToLower(string(args[j+1]))
		default:
			cl.w.Error(errSyntax)
			return
		}
	}
	var keys []string
	next := s.db(cl).Scan(cursor, count, func(k, _ string) {
		if (pat == "" || pat == "*" || globMatch(pat, k)) && (typ == "" || typ == "string") {
			keys = append(keys, k)
		}
	})
	cl.w.Array(2)
	cl.w.Bulk(strconv.FormatUint(next, 10))
	cl.w.Array(len(keys))
	for _, k := range keys {
		cl.w.Bulk(k)
	}
}

// globMatch reports whether s matches the glob pattern pat as Redis's
// stringmatchlen does: * and ? wildcards, [abc], [^abc] and [a-z] classes,
// and \ escaping the next character.
func globMatch(pat, s string) bool {
	// star and back remember the last * for backtracking: on a mismatch,
	// that * takes one more character.
	star, back := -1, 0
	p, i := 0, 0
	for i < len(s) {
		if p < len(pat) {
			switch c := pat[p]; c {
			case '*':
				for p < len(pat) && pat[p] == '*' {
					p++
				}
				if p == len(pat) {
					return true
				}
				star, back = p, i
				continue
			case '?':
				p++
				i++
				continue
			case '[':
				if q, ok := matchClass(pat, p, s[i]); ok {
					p, i = q, i+1
					continue
				}
			case '\\':
				if p+1 < len(pat) {
					if pat[p+1] == s[i] {
						p, i = p+2, i+1
						continue
					}
					break
				}
				fallthrough
			default:
				if c == s[i] {
					p, i = p+1, i+1
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		back++
		p, i = star, back
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}

// matchClass matches c against the class that starts at pat[p] ('[') and
// returns the position after the class and whether c matched. An
// unterminated class ends with the pattern, as in Redis.
func matchClass(pat string, p int, c byte) (int, bool) {
	p++
	not := p < len(pat) && pat[p] == '^'
	if not {
		p++
	}
	match := false
	for p < len(pat) && pat[p] != ']' {
		switch {
		case pat[p] == '\\' && p+1 < len(pat):
			p++
			if pat[p] == c {
				match = true
			}
		case p+2 < len(pat) && pat[p+1] == '-':
			lo, hi := pat[p], pat[p+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= c && c <= hi {
				match = true
			}
			p += 2
		case pat[p] == c:
			match = true
		}
		p++
	}
	if p < len(pat) {
		p++ // the closing ]
	}
	return p, match != not
}
