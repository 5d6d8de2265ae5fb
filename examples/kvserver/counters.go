package main

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// The integer family: INCR, INCRBY, DECR, DECRBY and INCRBYFLOAT. Each
// reads, computes and writes, so each holds the keyspace exclusively; as
// in Redis, a missing key counts as 0 and the key keeps its deadline.

func cmdIncr(s *Server, cl *client, args [][]byte) { s.incrBy(cl, args[1], 1) }

func cmdDecr(s *Server, cl *client, args [][]byte) { s.incrBy(cl, args[1], -1) }

func cmdIncrBy(s *Server, cl *client, args [][]byte) {
	n, ok := parseInt(args[2])
	if !ok {
		cl.w.Error(errNotInteger)
		return
	}
	s.incrBy(cl, args[1], n)
}

func cmdDecrBy(s *Server, cl *client, args [][]byte) {
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		cl.w.Error(errNotInteger)
	case n == math.MinInt64:
		cl.w.Error("ERR decrement would overflow")
	default:
		s.incrBy(cl, args[1], -n)
	}
}

// incrBy adds delta to the integer at key and replies with the sum.
func (s *Server) incrBy(cl *client, key []byte, delta int64) {
	db, k := s.db(cl), view(key)
	v, found := db.Get(k)
	cur := int64(0)
	if found {
		var ok bool
		if cur, ok = parseInt(v); !ok {
			cl.w.Error(errNotInteger)
			return
		}
	}
	if (delta < 0 && cur < 0 && delta < math.MinInt64-cur) || (delta > 0 && cur > 0 && delta > math.MaxInt64-cur) {
		cl.w.Error("ERR increment or decrement would overflow")
		return
	}
	cur += delta
	s.overwrite(cl, key, strconv.FormatInt(cur, 10), found, "incrby")
	cl.w.Int(cur)
}

// overwrite stores val at key, keeping the key's deadline if it existed
// (found), as Redis's dbOverwrite does, and notifies the string event.
func (s *Server) overwrite(cl *client, key []byte, val string, found bool, event string) {
	db, k := s.db(cl), view(key)
	defer s.notify(notifyString, event, cl.db, k)
	if found {
		if d, ok := db.Deadline(k); ok && !d.IsZero() {
			db.Set(string(key), val, d)
			s.modified(cl, k)
			return
		}
	}
	db.Set(string(key), val, time.Time{})
	s.modified(cl, k)
}

// Long doubles. Redis computes INCRBYFLOAT in C's long double, which on
// x86-64 is the x87 80-bit format: a 64-bit significand and exponents to
// ±16383. A big.Float of 64 bits rounded to nearest even adds exactly as
// it does, so that kvserver's sums, and the digits it prints, are Redis's.
const (
	ldPrec    = 64
	ldMaxExp  = 16384  // 2^16384 overflows to infinity
	ldMinExp  = -16445 // below the smallest subnormal, 2^-16445, is zero
	ldMaxText = 5 * 1024
)

// parseLongDouble parses s as Redis's string2ld does (C's strtold, whole
// string, no leading blank): decimal or hexadecimal, "inf" and "infinity"
// in any case (inf reports it); NaN, overflow and underflow to zero are
// refused.
func parseLongDouble(s string) (f *big.Float, inf, ok bool) {
	if len(s) == 0 || len(s) >= ldMaxText || isBlank(s[0]) {
		return nil, false, false
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return nil, false, false
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		return nil, true, true
	}
	if !validFloat(body) {
		return nil, false, false
	}
	f, _, err := big.ParseFloat(s, 0, ldPrec, big.ToNearestEven)
	if err != nil {
		return nil, false, false
	}
	if f.Sign() != 0 {
		if e := f.MantExp(nil); e > ldMaxExp || e < ldMinExp {
			return nil, false, false
		}
	}
	return f, false, true
}

// validFloat reports whether s, without its sign, is what strtold reads
// whole: digits with an optional point and exponent, or a hexadecimal
// significand with an optional binary exponent.
func validFloat(s string) bool {
	hex := len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
	if hex {
		s = s[2:]
	}
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' || hex && isHex(c) }
	digits, i := 0, 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (!hex && (s[i] == 'e' || s[i] == 'E') || hex && (s[i] == 'p' || s[i] == 'P')) {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// formatLongDouble writes f as Redis's ld2string in human mode: "%.17Lf"
// without trailing zeros (nor a trailing point), and "-0" as "0".
func formatLongDouble(f *big.Float) string {
	t := f.Text('f', 17)
	if strings.IndexByte(t, '.') >= 0 {
		t = strings.TrimRight(t, "0")
		t = strings.TrimSuffix(t, ".")
	}
	if t == "-0" {
		t = "0"
	}
	return t
}

// cmdIncrByFloat answers INCRBYFLOAT key increment: the sum, stored and
// returned as a string, computed as Redis computes it.
func cmdIncrByFloat(s *Server, cl *client, args [][]byte) {
	db := s.db(cl)
	v, found := db.Get(view(args[1]))
	cur := new(big.Float).SetPrec(ldPrec)
	curInf := false
	if found {
		f, inf, ok := parseLongDouble(v)
		if !ok {
			cl.w.Error(errNotFloat)
			return
		}
		cur, curInf = f, inf
	}
	incr, incrInf, ok := parseLongDouble(string(args[2]))
	if !ok {
		cl.w.Error(errNotFloat)
		return
	}
	if curInf || incrInf {
		cl.w.Error(errNaNOrInf)
		return
	}
	sum := new(big.Float).SetPrec(ldPrec).SetMode(big.ToNearestEven).Add(cur, incr)
	if sum.Sign() != 0 && sum.MantExp(nil) > ldMaxExp {
		cl.w.Error(errNaNOrInf)
		return
	}
	text := formatLongDouble(sum)
	s.overwrite(cl, args[1], text, found, "incrbyfloat")
	cl.w.Bulk(text)
}

const (
	errNotFloat = "ERR value is not a valid float"
	errNaNOrInf = "ERR increment would produce NaN or Infinity"
)
