package main

import (
	"strconv"
	"strings"

	"github.com/ttlkit/ttlkit/expiry"
)

// Keyspace notification classes, Redis's notify-keyspace-events letters.
const (
	notifyKeyspace = 1 << iota // K
	notifyKeyevent             // E
	notifyGeneric              // g
	notifyString               // $
	notifyList                 // l
	notifySet                  // s
	notifyHash                 // h
	notifyZset                 // z
	notifyExpired              // x
	notifyEvicted              // e
	notifyStream               // t
	notifyKeyMiss              // m
	notifyModule               // d
	notifyNew                  // n

	// notifyAll is what A stands for: every class but m and n.
	notifyAll = notifyGeneric | notifyString | notifyList | notifySet | notifyHash | notifyZset |
		notifyExpired | notifyEvicted | notifyStream | notifyModule
)

var notifyLetters = []struct {
	c    byte
	flag int
}{
	{'g', notifyGeneric}, {'$', notifyString}, {'l', notifyList}, {'s', notifySet},
	{'h', notifyHash}, {'z', notifyZset}, {'x', notifyExpired}, {'e', notifyEvicted},
	{'t', notifyStream}, {'d', notifyModule}, {'n', notifyNew},
}

// parseNotify parses a notify-keyspace-events value as Redis does.
func parseNotify(v string) (int, bool) {
	flags := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case 'A':
			flags |= notifyAll
		case 'K':
			flags |= notifyKeyspace
		case 'E':
			flags |= notifyKeyevent
		case 'm':
			flags |= notifyKeyMiss
		default:
			found := false
			for _, l := range notifyLetters {
				if l.c == c {
					flags |= l.flag
					found = true
				}
			}
			if !found {
				return 0, false
			}
		}
	}
	return flags, true
}

// formatNotify writes flags back as Redis's CONFIG GET does (which, after
// A, leaves n out).
func formatNotify(flags int) string {
	var b strings.Builder
	if flags&notifyAll == notifyAll {
		b.WriteByte('A')
	} else {
		for _, l := range notifyLetters {
			if flags&l.flag != 0 {
				b.WriteByte(l.c)
			}
		}
	}
	if flags&notifyKeyspace != 0 {
		b.WriteByte('K')
	}
	if flags&notifyKeyevent != 0 {
		b.WriteByte('E')
	}
	if flags&notifyKeyMiss != 0 {
		b.WriteByte('m')
	}
	return b.String()
}

// notify publishes a keyspace event of class flag, as Redis's
// notifyKeyspaceEvent: on __keyspace@<db>__:<key> with the event's name,
// then on __keyevent@<db>__:<event> with the key, as the K and E classes
// ask. kvserver emits the generic (g), string ($) and expired (x)
// classes; its data has no others.
func (s *Server) notify(flag int, event string, db int, key string) {
	flags := int(s.notifyFlags.Load())
	if flags&flag == 0 || flags&(notifyKeyspace|notifyKeyevent) == 0 {
		return
	}
	d := strconv.Itoa(db)
	key = strings.Clone(key) // key may be a view of the command's arguments
	if flags&notifyKeyspace != 0 {
		s.publish("__keyspace@"+d+"__:"+key, event)
	}
	if flags&notifyKeyevent != 0 {
		s.publish("__keyevent@"+d+"__:"+event, key)
	}
}

// onExpired returns the OnEvent callback of database db: every key found
// expired, on access or by the expiry cycle, is an expired event.
func (s *Server) onExpired(db int) func(expiry.Event[string, string]) {
	return func(e expiry.Event[string, string]) {
		s.notify(notifyExpired, "expired", db, e.Key)
	}
}
