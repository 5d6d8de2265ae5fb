package main

import "strings"

// lcsMaxTable bounds LCS's table of lengths (4 bytes a cell); beyond it
// kvserver answers as Redis does when it cannot allocate the table.
const lcsMaxTable = 1 << 30

// cmdLCS answers LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len]
// [WITHMATCHLEN] as Redis 7.0's lcsCommand does, missing keys being empty
// strings: the longest common subsequence, its length, or the matching
// ranges from the ends of the strings backwards.
func cmdLCS(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	a, _ := db.Get(view(args[1]))
	b, _ := db.Get(view(args[2]))
	getIdx, getLen, withMatchLen, minMatchLen := false, false, false, int64(0)
	for j := 3; j < len(args); j++ {
		switch opt := strings.ToLower(string(args[j])); {
		case opt == "idx":
			getIdx = true
		case opt == "len":
			getLen = true
		case opt == "withmatchlen":
			withMatchLen = true
		case opt == "minmatchlen" && j+1 < len(args):
			n, ok := parseInt(args[j+1])
			if !ok {
				cl.w.Error(errNotInteger)
				return
			}
			minMatchLen = max(n, 0)
			j++
		default:
			cl.w.Error(errSyntax)
			return
		}
	}
	if getIdx && getLen {
		cl.w.Error("ERR If you want both the length and indexes, please just use IDX.")
		return
	}
	alen, blen := len(a), len(b)
	if uint64(alen+1)*uint64(blen+1) > lcsMaxTable {
		cl.w.Error("ERR Insufficient memory, failed allocating transient memory for LCS")
		return
	}
	// dp[j+(blen+1)*i] is the length of the LCS of a[:i] and b[:j].
	w := blen + 1
	dp := make([]uint32, (alen+1)*w)
	for i := 1; i <= alen; i++ {
		for j := 1; j <= blen; j++ {
			if a[i-1] == b[j-1] {
				dp[j+w*i] = dp[j-1+w*(i-1)] + 1
			} else {
				dp[j+w*i] = max(dp[j+w*(i-1)], dp[j-1+w*i])
			}
		}
	}
	idx := dp[blen+w*alen]
	if getLen {
		cl.w.Int(int64(idx))
		return
	}
	result := make([]byte, idx)
	type match struct{ a0, a1, b0, b1 int }
	var matches []match
	aStart, aEnd, bStart, bEnd := alen, 0, 0, 0
	for i, j := alen, blen; i > 0 && j > 0; {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			switch {
			case aStart == alen:
				aStart, aEnd, bStart, bEnd = i-1, i-1, j-1, j-1
			case aStart == i && bStart == j:
				aStart--
				bStart--
			default:
				emit = true
			}
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if dp[j+w*(i-1)] > dp[j-1+w*i] {
				i--
			} else {
				j--
			}
			if aStart != alen {
				emit = true
			}
		}
		if emit {
			if minMatchLen == 0 || int64(aEnd-aStart+1) >= minMatchLen {
				matches = append(matches, match{aStart, aEnd, bStart, bEnd})
			}
			aStart = alen
		}
	}
	if !getIdx {
		cl.w.BulkBytes(result)
		return
	}
	cl.w.Map(2)
	cl.w.Bulk("matches")
	cl.w.Array(len(matches))
	for _, m := range matches {
		if withMatchLen {
			cl.w.Array(3)
		} else {
			cl.w.Array(2)
		}
		cl.w.Array(2)
		cl.w.Int(int64(m.a0))
		cl.w.Int(int64(m.a1))
		cl.w.Array(2)
		cl.w.Int(int64(m.b0))
		cl.w.Int(int64(m.b1))
		if withMatchLen {
			cl.w.Int(int64(m.a1 - m.a0 + 1))
		}
	}
	cl.w.Bulk("len")
	cl.w.Int(int64(dp[blen+w*alen]))
}
