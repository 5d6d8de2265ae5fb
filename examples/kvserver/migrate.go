package main

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cmdMigrate answers MIGRATE host port key|"" destination-db timeout
// [COPY] [REPLACE] [AUTH password | AUTH2 username password] [KEYS
// key...] as Redis does: it sends the target (kvserver or Redis) AUTH,
// SELECT and a RESTORE of each key's DUMP payload with its time to live,
// and deletes the keys the target took unless COPY. It holds the keyspace
// for the whole exchange, so that it is atomic, as in Redis; a target that
// does not answer within the timeout (milliseconds, 1000 when not
// positive) gets an IOERR.
func cmdMigrate(s *Server, cl *client, args [][]byte) {
	first, num := 3, 1
	copyKeys, replace := false, false
	var user, pass []byte
	for j := 6; j < len(args); j++ {
		more := len(args) - 1 - j
		switch strings.ToLower(string(args[j])) {
		case "copy":
			copyKeys = true
		case "replace":
			replace = true
		case "auth":
			if more < 1 {
				cl.w.Error(errSyntax)
				return
			}
			j++
			pass = args[j]
		case "auth2":
			if more < 2 {
				cl.w.Error(errSyntax)
				return
			}
			user, pass = args[j+1], args[j+2]
			j += 2
		case "keys":
			if len(args[3]) != 0 {
				cl.w.Error("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string")
				return
			}
			first, num = j+1, len(args)-j-1
			j = len(args)
		default:
			cl.w.Error(errSyntax)
			return
		}
	}
	timeout, ok := parseInt(args[5])
	if !ok {
		cl.w.Error(errNotInteger)
		return
	}
	dbid, ok := parseInt(args[4])
	if !ok {
		cl.w.Error(errNotInteger)
		return
	}
	if timeout <= 0 {
		timeout = 1000
	}
	wait := time.Duration(min(timeout, 1<<40)) * time.Millisecond

	db := s.db(cl)
	type item struct {
		key []byte
		val string
		at  time.Time
	}
	var items []item
	for _, k := range args[first : first+num] {
		if v, ok := db.Get(view(k)); ok {
			at, _ := db.Deadline(view(k))
			items = append(items, item{k, v, at})
		}
	}
	if len(items) == 0 {
		cl.w.Simple("NOKEY")
		return
	}

	var cmd bytes.Buffer
	appendCommand := func(args ...[]byte) {
		cmd.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
		for _, a := range args {
			cmd.WriteString("$" + strconv.Itoa(len(a)) + "\r\n")
			cmd.Write(a)
			cmd.WriteString("\r\n")
		}
	}
	if pass != nil {
		if user != nil {
			appendCommand([]byte("AUTH"), user, pass)
		} else {
			appendCommand([]byte("AUTH"), pass)
		}
	}
	appendCommand([]byte("SELECT"), []byte(strconv.FormatInt(dbid, 10)))
	now := s.now().UnixMilli()
	sent := items[:0]
	for _, it := range items {
		ttl := int64(0)
		if !it.at.IsZero() {
			if ttl = expireMillis(it.at) - now; ttl < 0 {
				continue
			}
			ttl = max(ttl, 1)
		}
		restore := [][]byte{[]byte("RESTORE"), it.key, []byte(strconv.FormatInt(ttl, 10)), dumpPayload(it.val)}
		if replace {
			restore = append(restore, []byte("REPLACE"))
		}
		appendCommand(restore...)
		sent = append(sent, it)
	}

	addr := net.JoinHostPort(string(args[1]), string(args[2]))
	conn, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		// Redis connects without blocking, so a refused connection shows
		// only when it writes.
		if errors.Is(err, syscall.ECONNREFUSED) {
			cl.w.Error("IOERR error or timeout writing to target instance")
		} else {
			cl.w.Error("IOERR error or timeout connecting to the client")
		}
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	if _, err := conn.Write(cmd.Bytes()); err != nil {
		cl.w.Error("IOERR error or timeout writing to target instance")
		return
	}
	r := bufio.NewReader(conn)
	readLine := func() (string, bool) {
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		line, err := r.ReadString('\n')
		return strings.TrimRight(line, "\r\n"), err == nil && len(line) > 0
	}
	var authReply, selectReply string
	if pass != nil {
		if authReply, ok = readLine(); !ok {
			cl.w.Error("IOERR error or timeout reading to target instance")
			return
		}
	}
	if selectReply, ok = readLine(); !ok {
		cl.w.Error("IOERR error or timeout reading to target instance")
		return
	}
	targetErr := ""
	for _, it := range sent {
		reply, ok := readLine()
		if !ok {
			if targetErr == "" {
				cl.w.Error("IOERR error or timeout reading to target instance")
				return
			}
			break
		}
		switch {
		case strings.HasPrefix(authReply, "-"):
			reply = authReply
		case strings.HasPrefix(selectReply, "-"):
			reply = selectReply
		}
		if strings.HasPrefix(reply, "-") {
			if targetErr == "" {
				targetErr = reply[1:]
			}
			continue
		}
		if !copyKeys {
			if v, ok := db.Delete(view(it.key)); ok {
				s.freed(len(v))
			}
			s.modified(cl, view(it.key))
			s.notify(notifyGeneric, "del", cl.db, view(it.key))
		}
	}
	if targetErr != "" {
		cl.w.Error("ERR Target instance replied with error: " + targetErr)
		return
	}
	cl.w.Simple("OK")
}
