package main

// LZF, the compression of Redis's RDB strings, ported from liblzf 3.6 as
// Redis builds it (lzf_c.c, lzf_d.c: HLOG 16, VERY_FAST), so that DUMP
// compresses a value into the bytes Redis writes for it. Redis leaves its
// hash table uninitialised; this one starts empty, which matches what
// Redis produces whenever the stale entries point nowhere into the input.

const (
	lzfHLog   = 16
	lzfHSize  = 1 << lzfHLog
	lzfMaxLit = 1 << 5
	lzfMaxOff = 1 << 13
	lzfMaxRef = (1 << 8) + (1 << 3)
)

func lzfIdx(h uint32) uint32 { return ((h >> (3*8 - lzfHLog)) - h*5) & (lzfHSize - 1) }

// lzfCompress compresses in into at most outLen bytes, or returns nil when
// that is not enough (then Redis stores the string as it is).
func lzfCompress(in []byte, outLen int) []byte {
	n := len(in)
	if n == 0 || outLen <= 0 || n < 3 {
		return nil
	}
	htab := make([]int32, lzfHSize) // positions; 0 is never a match, as in C
	out := make([]byte, outLen)
	op, ip, lit := 1, 0, 0 // op past the run's length byte
	hval := uint32(in[0])<<8 | uint32(in[1])
	for ip < n-2 {
		hval = hval<<8 | uint32(in[ip+2])
		slot := lzfIdx(hval)
		ref := int(htab[slot])
		htab[slot] = int32(ip)
		off := ip - ref - 1
		if off >= 0 && off < lzfMaxOff && ref > 0 &&
			in[ref] == in[ip] && in[ref+1] == in[ip+1] && in[ref+2] == in[ip+2] {
			length := 2
			maxLen := min(n-ip-length, lzfMaxRef)
			out[op-lit-1] = byte(lit - 1) // stop run
			if lit == 0 {
				op-- // undo an empty run
			}
			if op+3+1 >= outLen {
				return nil
			}
			length = matchLen(in, ref, ip, maxLen)
			length -= 2 // octets - 1
			ip++
			if length < 7 {
				out[op] = byte(off>>8) + byte(length<<5)
				op++
			} else {
				out[op] = byte(off>>8) + 7<<5
				out[op+1] = byte(length - 7)
				op += 2
			}
			out[op] = byte(off)
			op++
			lit = 0
			op++ // start run
			ip += length + 1
			if ip >= n-2 {
				break
			}
			ip -= 2
			hval = uint32(in[ip])<<8 | uint32(in[ip+1])
			hval = hval<<8 | uint32(in[ip+2])
			htab[lzfIdx(hval)] = int32(ip)
			ip++
			hval = hval<<8 | uint32(in[ip+2])
			htab[lzfIdx(hval)] = int32(ip)
			ip++
			continue
		}
		if op >= outLen {
			return nil
		}
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == lzfMaxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	if op+3 > outLen {
		return nil
	}
	for ip < n {
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == lzfMaxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	out[op-lit-1] = byte(lit - 1)
	if lit == 0 {
		op--
	}
	return out[:op]
}

// matchLen extends a match of 3 bytes at ref and ip as lzf_c.c does: 16
// bytes unbounded when more than 16 may match (so a match may run past
// maxLen to the end of the input), then up to maxLen.
func matchLen(in []byte, ref, ip, maxLen int) int {
	length := 2
	if maxLen > 16 {
		for range 16 {
			length++
			if in[ref+length] != in[ip+length] {
				return length
			}
		}
	}
	for {
		length++
		if length >= maxLen || in[ref+length] != in[ip+length] {
			return length
		}
	}
}

// lzfDecompress expands in into exactly n bytes, reporting whether the
// data was well formed and of that length.
func lzfDecompress(in []byte, n uint64) ([]byte, bool) {
	if n > 1<<32 {
		return nil, false
	}
	out := make([]byte, 0, n)
	for ip := 0; ip < len(in); {
		ctrl := int(in[ip])
		ip++
		if ctrl < 1<<5 {
			ctrl++
			if uint64(len(out)+ctrl) > n || ip+ctrl > len(in) {
				return nil, false
			}
			out = append(out, in[ip:ip+ctrl]...)
			ip += ctrl
			continue
		}
		length := ctrl >> 5
		if length == 7 {
			if ip >= len(in) {
				return nil, false
			}
			length += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return nil, false
		}
		ref := len(out) - ((ctrl & 0x1f) << 8) - 1 - int(in[ip])
		ip++
		length += 2
		if uint64(len(out)+length) > n || ref < 0 {
			return nil, false
		}
		for i := range length {
			out = append(out, out[ref+i])
		}
	}
	return out, uint64(len(out)) == n
}
