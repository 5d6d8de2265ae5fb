package main

import (
	"encoding/binary"
	"errors"
	"hash/crc64"
	"math"
	"strconv"
	"strings"
	"time"
)

// DUMP and RESTORE use Redis's serialization, so that a payload moves
// between kvserver and Redis in either direction: the value in the RDB
// string encoding (a type byte, then an integer, LZF-compressed or plain
// string), the RDB version in two bytes and a CRC64 of all that, both
// little endian.

// rdbVersion is Redis 7.0's RDB version; RESTORE takes payloads of this
// version or older, as Redis does.
const rdbVersion = 10

const (
	rdbTypeString = 0
	rdbEncInt8    = 0
	rdbEncInt16   = 1
	rdbEncInt32   = 2
	rdbEncLZF     = 3
)

const (
	errBadPayload = "ERR DUMP payload version or checksum are wrong"
	errBadFormat  = "ERR Bad data format"
	errBusyKey    = "BUSYKEY Target key name already exists."
)

// crcTable is Redis's crc64 (crc64.c): the Jones polynomial
// 0xad93d23594c935a9, reflected, with neither initial nor final inversion.
// hash/crc64 takes the reflected form and inverts on both ends, which
// redisCRC64 undoes.
var crcTable = crc64.MakeTable(0x95ac9329ac4bc9b5)

func redisCRC64(p []byte) uint64 { return ^crc64.Update(^uint64(0), crcTable, p) }

// dumpPayload returns the DUMP payload of the string v, byte for byte what
// Redis 7.0 writes for it.
func dumpPayload(v string) []byte {
	b := make([]byte, 0, len(v)+24)
	b = append(b, rdbTypeString)
	b = appendRDBString(b, v)
	b = binary.LittleEndian.AppendUint16(b, rdbVersion)
	return binary.LittleEndian.AppendUint64(b, redisCRC64(b))
}

// appendRDBString appends v as Redis's rdbSaveRawString does: a decimal
// integer of up to 11 bytes that fits 32 bits as an integer, a string of
// more than 20 bytes LZF-compressed when that saves anything, else its
// length and bytes.
func appendRDBString(b []byte, v string) []byte {
	if len(v) <= 11 {
		if n, ok := parseInt(v); ok && n >= math.MinInt32 && n <= math.MaxInt32 {
			switch {
			case n >= math.MinInt8 && n <= math.MaxInt8:
				return append(b, 0xc0|rdbEncInt8, byte(n))
			case n >= math.MinInt16 && n <= math.MaxInt16:
				return binary.LittleEndian.AppendUint16(append(b, 0xc0|rdbEncInt16), uint16(n))
			default:
				return binary.LittleEndian.AppendUint32(append(b, 0xc0|rdbEncInt32), uint32(n))
			}
		}
	}
	if len(v) > 20 {
		if c := lzfCompress([]byte(v), len(v)-4); c != nil {
			b = append(b, 0xc0|rdbEncLZF)
			b = appendRDBLen(b, uint64(len(c)))
			b = appendRDBLen(b, uint64(len(v)))
			return append(b, c...)
		}
	}
	b = appendRDBLen(b, uint64(len(v)))
	return append(b, v...)
}

// appendRDBLen appends n in the RDB length encoding: 6, 14, 32 or 64 bits.
func appendRDBLen(b []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return append(b, 0x40|byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0x80), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0x81), n)
	}
}

var (
	errPayload = errors.New("payload version or checksum")
	errFormat  = errors.New("bad data format")
)

// verifyPayload checks a payload's version and checksum as Redis's
// verifyDumpPayload does and returns the serialized value.
func verifyPayload(p []byte) ([]byte, error) {
	if len(p) < 10 {
		return nil, errPayload
	}
	footer := p[len(p)-10:]
	if binary.LittleEndian.Uint16(footer) > rdbVersion {
		return nil, errPayload
	}
	if redisCRC64(p[:len(p)-8]) != binary.LittleEndian.Uint64(footer[2:]) {
		return nil, errPayload
	}
	return p[:len(p)-10], nil
}

// loadString reads the value of a verified payload: a string in any of the
// RDB string encodings. Other types are a bad format here, kvserver
// holding strings only.
func loadString(p []byte) (string, error) {
	if len(p) < 1 || p[0] != rdbTypeString {
		return "", errFormat
	}
	p = p[1:]
	if len(p) < 1 {
		return "", errFormat
	}
	if p[0]>>6 == 3 {
		enc, p := p[0]&0x3f, p[1:]
		switch enc {
		case rdbEncInt8:
			if len(p) < 1 {
				return "", errFormat
			}
			return strconv.FormatInt(int64(int8(p[0])), 10), nil
		case rdbEncInt16:
			if len(p) < 2 {
				return "", errFormat
			}
			return strconv.FormatInt(int64(int16(binary.LittleEndian.Uint16(p))), 10), nil
		case rdbEncInt32:
			if len(p) < 4 {
				return "", errFormat
			}
			return strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(p))), 10), nil
		case rdbEncLZF:
			clen, p, ok := loadRDBLen(p)
			if !ok {
				return "", errFormat
			}
			n, p, ok := loadRDBLen(p)
			if !ok || clen > uint64(len(p)) || n == 0 {
				return "", errFormat
			}
			out, ok := lzfDecompress(p[:clen], n)
			if !ok {
				return "", errFormat
			}
			return string(out), nil
		}
		return "", errFormat
	}
	n, p, ok := loadRDBLen(p)
	if !ok || n > uint64(len(p)) {
		return "", errFormat
	}
	return string(p[:n]), nil
}

// loadRDBLen reads a length that is not a special encoding.
func loadRDBLen(p []byte) (uint64, []byte, bool) {
	if len(p) < 1 {
		return 0, nil, false
	}
	switch p[0] >> 6 {
	case 0:
		return uint64(p[0] & 0x3f), p[1:], true
	case 1:
		if len(p) < 2 {
			return 0, nil, false
		}
		return uint64(p[0]&0x3f)<<8 | uint64(p[1]), p[2:], true
	}
	switch p[0] {
	case 0x80:
		if len(p) < 5 {
			return 0, nil, false
		}
		return uint64(binary.BigEndian.Uint32(p[1:])), p[5:], true
	case 0x81:
		if len(p) < 9 {
			return 0, nil, false
		}
		return binary.BigEndian.Uint64(p[1:]), p[9:], true
	}
	return 0, nil, false
}

// cmdDump answers DUMP key: the key's value serialized as Redis serializes
// it, or null.
func cmdDump(s *Server, cl *client, args [][]byte) {
	v, ok := s.db(cl).Get(view(args[1]))
	if !ok {
		cl.w.Null()
		return
	}
	cl.w.BulkBytes(dumpPayload(v))
}

// cmdRestore answers RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME
// seconds] [FREQ frequency], checking its arguments in Redis's order:
// options, an existing key, the TTL, the payload.
func cmdRestore(s *Server, cl *client, args [][]byte) {
	replace, absTTL, idle, freq := false, false, int64(-1), int64(-1)
	for j := 4; j < len(args); j++ {
		more := len(args) - j - 1
		switch opt := strings.ToLower(string(args[j])); {
		case opt == "replace":
			replace = true
		case opt == "absttl":
			absTTL = true
		case opt == "idletime" && more >= 1 && freq == -1:
			n, ok := parseInt(args[j+1])
			if !ok {
				cl.w.Error(errNotInteger)
				return
			}
			if n < 0 {
				cl.w.Error("ERR Invalid IDLETIME value, must be >= 0")
				return
			}
			idle = n
			j++
		case opt == "freq" && more >= 1 && idle == -1:
			n, ok := parseInt(args[j+1])
			if !ok {
				cl.w.Error(errNotInteger)
				return
			}
			if n < 0 || n > 255 {
				cl.w.Error("ERR Invalid FREQ value, must be >= 0 and <= 255")
				return
			}
			freq = n
			j++
		default:
			cl.w.Error(errSyntax)
			return
		}
	}
	db, key := s.db(cl), view(args[1])
	if _, exists := db.Deadline(key); exists && !replace {
		cl.w.Error(errBusyKey)
		return
	}
	ttl, ok := parseInt(args[2])
	if !ok {
		cl.w.Error(errNotInteger)
		return
	}
	if ttl < 0 {
		cl.w.Error("ERR Invalid TTL value, must be >= 0")
		return
	}
	p, err := verifyPayload(args[3])
	if err != nil {
		cl.w.Error(errBadPayload)
		return
	}
	v, err := loadString(p)
	if err != nil {
		cl.w.Error(errBadFormat)
		return
	}
	deleted := false
	if replace {
		if old, ok := db.Delete(key); ok {
			s.freed(len(old))
			deleted = true
		}
	}
	if ttl != 0 && !absTTL {
		ttl = satAdd(ttl, s.now().UnixMilli())
	}
	if ttl != 0 && ttl <= s.now().UnixMilli() {
		// Already expired: Redis stores nothing and answers OK, deleting
		// the key that REPLACE replaced.
		if deleted {
			s.modified(cl, key)
			s.notify(notifyGeneric, "del", cl.db, key)
		}
		cl.w.Simple("OK")
		return
	}
	var at time.Time
	if ttl != 0 {
		at = deadlineOf(ttl)
	}
	db.Set(string(args[1]), v, at)
	s.modified(cl, key)
	s.notify(notifyGeneric, "restore", cl.db, key)
	cl.w.Simple("OK")
}

// satAdd adds two non-negative int64s, stopping at the largest.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
