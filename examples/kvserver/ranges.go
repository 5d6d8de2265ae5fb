package main

import "math"

// Commands that read or write part of a string: APPEND, SETRANGE,
// GETRANGE (and its old name SUBSTR). The writers keep the key's deadline.

func errTooBig() string {
	return "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
}

// cmdAppend answers APPEND key value: the new length.
func cmdAppend(s *Server, cl *client, args [][]byte) {
	v, found := s.db(cl).Get(view(args[1]))
	if int64(len(v))+int64(len(args[2])) > s.cfg.Limits.MaxBulkLen {
		cl.w.Error(errTooBig())
		return
	}
	nv := v + string(args[2])
	s.overwrite(cl, args[1], nv, found, "append")
	cl.w.Int(int64(len(nv)))
}

// cmdSetRange answers SETRANGE key offset value: the value written over
// the string from offset, padded with zero bytes; the new length.
func cmdSetRange(s *Server, cl *client, args [][]byte) {
	off, ok := parseInt(args[2])
	if !ok {
		cl.w.Error(errNotInteger)
		return
	}
	if off < 0 {
		cl.w.Error("ERR offset is out of range")
		return
	}
	v, found := s.db(cl).Get(view(args[1]))
	val := args[3]
	if len(val) == 0 {
		cl.w.Int(int64(len(v)))
		return
	}
	if off > s.cfg.Limits.MaxBulkLen-int64(len(val)) {
		cl.w.Error(errTooBig())
		return
	}
	n := max(int64(len(v)), off+int64(len(val)))
	b := make([]byte, n)
	copy(b, v)
	copy(b[off:], val)
	s.overwrite(cl, args[1], string(b), found, "setrange")
	cl.w.Int(n)
}

// cmdGetRange answers GETRANGE key start end with Redis's index rules:
// negative indexes count from the end, and the range is clipped.
func cmdGetRange(s *Server, cl *client, args [][]byte) {
	start, ok1 := parseInt(args[2])
	end, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		cl.w.Error(errNotInteger)
		return
	}
	v, _ := s.db(cl).Get(view(args[1]))
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		cl.w.Bulk("")
		return
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 || start == math.MaxInt64 {
		cl.w.Bulk("")
		return
	}
	cl.w.Bulk(v[start : end+1])
}
