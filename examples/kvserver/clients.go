package main

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clientInfo is what CLIENT LIST shows of a connection. Its own goroutine
// copies it after each command, so that other connections read it under
// infoMu while the goroutine keeps its fields to itself.
type clientInfo struct {
	name       string
	db         int
	resp       int
	sub, psub  int
	multi      int // queued commands, -1 outside MULTI
	cmd        string
	lastActive time.Time
}

// clientState is the part of a client that CLIENT LIST reads from other
// connections.
type clientState struct {
	created time.Time
	infoMu  sync.Mutex
	info    clientInfo
	// replyOff and skipNext are CLIENT REPLY OFF and SKIP; sink takes
	// the replies they suppress, and base is the connection's Writer.
	replyOff, skipNext bool
	sink, base         *Writer
	// cur is the command running, or that ran last; nil for an unknown one.
	cur *command
	// ended is when the last command's call ended, until publishInfo.
	ended time.Time
}

// snapshot returns the client's info as it is at now; only its own
// goroutine calls it.
func (cl *client) snapshot(cmd string, now time.Time) clientInfo {
	multi := -1
	if cl.txn.multi {
		multi = len(cl.txn.queue)
	}
	resp := 2
	if cl.w.resp3 {
		resp = 3
	}
	return clientInfo{name: cl.name, db: cl.db, resp: resp, sub: len(cl.subs), psub: len(cl.psubs),
		multi: multi, cmd: cmd, lastActive: now}
}

// publishInfo records the client's info after a command.
func (cl *client) publishInfo() {
	name := "NULL"
	if cl.cur != nil {
		name = cl.cur.name
	}
	// The end of the command's call, read for its statistics, is when
	// the client was last active: one clock read less per command.
	now := cl.ended
	if now.IsZero() {
		now = time.Now()
	}
	cl.ended = time.Time{}
	info := cl.snapshot(name, now)
	cl.infoMu.Lock()
	cl.info = info
	cl.infoMu.Unlock()
}

// register adds cl to the clients CLIENT LIST shows.
func (s *Server) register(cl *client) {
	cl.created = time.Now()
	cl.base = cl.w
	cl.publishInfo()
	s.connMu.Lock()
	s.clients[cl] = struct{}{}
	s.connMu.Unlock()
}

func (s *Server) deregister(cl *client) {
	s.connMu.Lock()
	delete(s.clients, cl)
	s.connMu.Unlock()
}

// line formats one line of CLIENT LIST with Redis 7's fields; the ones
// about Redis's buffers show kvserver's (a read buffer only while a
// command arrives, replies flushed after each pipeline).
func (c *client) line(self *client, now time.Time) string {
	info := func() clientInfo {
		if c == self {
			return self.snapshot(self.cur.name, now)
		}
		c.infoMu.Lock()
		defer c.infoMu.Unlock()
		return c.info
	}()
	flags := "N"
	switch {
	case info.sub+info.psub > 0:
		flags = "P"
	case info.multi >= 0:
		flags = "x"
	}
	multi := info.multi
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=%d flags=%s db=%d sub=%d psub=%d ssub=0 "+
		"multi=%d qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r "+
		"cmd=%s user=default redir=-1 resp=%d\n",
		c.id, addrString(c.conn.RemoteAddr()), addrString(c.conn.LocalAddr()), info.name,
		int64(now.Sub(c.created)/time.Second), int64(now.Sub(info.lastActive)/time.Second), flags, info.db,
		info.sub, info.psub, multi, info.cmd, info.resp)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// cmdClientList answers CLIENT LIST [TYPE normal|pubsub] [ID id ...].
func cmdClientList(s *Server, cl *client, args [][]byte) {
	var ids []int64
	typ := ""
	for j := 2; j < len(args); j++ {
		switch opt := strings.ToLower(string(args[j])); {
		case opt == "type" && j+1 < len(args):
			j++
			typ = strings.ToLower(string(args[j]))
			if typ != "normal" && typ != "pubsub" && typ != "master" && typ != "replica" && typ != "slave" {
				cl.w.Error("ERR Unknown client type '" + string(args[j]) + "'")
				return
			}
		case opt == "id" && j+1 < len(args):
			for j++; j < len(args); j++ {
				id, ok := parseInt(args[j])
				if !ok || id <= 0 {
					cl.w.Error("ERR Invalid client ID")
					return
				}
				ids = append(ids, id)
			}
		default:
			cl.w.Error(errSyntax)
			return
		}
	}
	s.connMu.Lock()
	cs := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		cs = append(cs, c)
	}
	s.connMu.Unlock()
	slices.SortFunc(cs, func(a, b *client) int { return int(a.id - b.id) })
	var b strings.Builder
	now := time.Now()
	for _, c := range cs {
		if ids != nil && !slices.Contains(ids, c.id) {
			continue
		}
		l := c.line(cl, now)
		pubsub := strings.Contains(l, " flags=P ")
		if (typ == "pubsub" && !pubsub) || (typ == "normal" && pubsub) || typ == "master" || typ == "replica" || typ == "slave" {
			continue
		}
		b.WriteString(l)
	}
	cl.w.Verbatim(b.String())
}

func cmdClientInfo(s *Server, cl *client, args [][]byte) {
	cl.w.Verbatim(cl.line(cl, time.Now()))
}

// cmdClientKill answers CLIENT KILL addr (the old form: OK or an error)
// and CLIENT KILL [ID id] [ADDR addr] [SKIPME yes|no] (the number killed).
func cmdClientKill(s *Server, cl *client, args [][]byte) {
	var id int64
	addr, skipme, old := "", true, len(args) == 3
	if old {
		addr = string(args[2])
	} else {
		if len(args)%2 != 0 {
			cl.w.Error(errSyntax)
			return
		}
		for j := 2; j < len(args); j += 2 {
			v := string(args[j+1])
			switch strings.ToLower(string(args[j])) {
			case "id":
				n, ok := parseInt(v)
				if !ok || n <= 0 {
					cl.w.Error("ERR client-id should be greater than 0")
					return
				}
				id = n
			case "addr":
				addr = v
			case "skipme":
				switch strings.ToLower(v) {
				case "yes":
					skipme = true
				case "no":
					skipme = false
				default:
					cl.w.Error(errSyntax)
					return
				}
			default:
				cl.w.Error(errSyntax)
				return
			}
		}
	}
	s.connMu.Lock()
	var victims []*client
	for c := range s.clients {
		if (id != 0 && c.id != id) || (addr != "" && addrString(c.conn.RemoteAddr()) != addr) {
			continue
		}
		if c == cl && skipme && !old {
			continue
		}
		victims = append(victims, c)
	}
	s.connMu.Unlock()
	for _, c := range victims {
		if c == cl {
			cl.quit = true // after this reply, as Redis closes after the reply
			continue
		}
		_ = c.conn.Close()
	}
	switch {
	case !old:
		cl.w.Int(int64(len(victims)))
	case len(victims) == 0:
		cl.w.Error("ERR No such client")
	default:
		cl.w.Simple("OK")
	}
}

// cmdClientNoEvict answers CLIENT NO-EVICT on|off: kvserver evicts no
// clients, so it only checks the argument.
func cmdClientNoEvict(s *Server, cl *client, args [][]byte) {
	switch strings.ToLower(string(args[2])) {
	case "on", "off":
		cl.w.Simple("OK")
	default:
		cl.w.Error(errSyntax)
	}
}

// cmdClientReply answers CLIENT REPLY ON|OFF|SKIP: OFF and SKIP get no
// reply themselves.
func cmdClientReply(s *Server, cl *client, args [][]byte) {
	switch strings.ToLower(string(args[2])) {
	case "on":
		cl.replyOff = false
		cl.base.Simple("OK")
	case "off":
		cl.replyOff = true
	case "skip":
		if !cl.replyOff {
			cl.skipNext = true
		}
	default:
		cl.w.Error(errSyntax)
	}
}

// silence sends the replies of the next command nowhere if CLIENT REPLY
// asks so, and returns what undoes it.
func (cl *client) silence() func() {
	if !cl.replyOff && !cl.skipNext {
		return nil
	}
	cl.skipNext = false
	if cl.sink == nil {
		cl.sink = NewWriter(io.Discard)
	}
	cl.sink.resp3 = cl.base.resp3
	cl.w = cl.sink
	return func() {
		cl.base.resp3 = cl.sink.resp3 // HELLO may have run
		cl.sink.buf, cl.sink.mark, cl.sink.size = cl.sink.buf[:0], 0, 0
		clear(cl.sink.segs)
		cl.sink.segs = cl.sink.segs[:0]
		cl.w = cl.base
	}
}

// cmdStat counts one command's calls, as INFO commandstats shows them.
// Counters are split by connection, as the keyspace lock is, so that
// commands in parallel do not share a cache line.
type cmdStat struct {
	calls, usec, rejected, failed atomic.Int64
	_                             [32]byte
}

type cmdStats [8]cmdStat

func (st *cmdStats) of(cl *client) *cmdStat { return &st[cl.id%int64(len(st))] }

// commandStats writes INFO's commandstats section: every command called
// or rejected at least once, subcommands as container|sub.
func (s *Server) commandStats(field func(string, any)) {
	var all []*command
	for _, c := range sortedCommands() {
		all = append(all, c)
		subs := make([]*command, 0, len(c.subs))
		for _, sc := range c.subs {
			subs = append(subs, sc)
		}
		slices.SortFunc(subs, func(a, b *command) int { return strings.Compare(a.name, b.name) })
		all = append(all, subs...)
	}
	for _, c := range all {
		var calls, usec, rejected, failed int64
		for i := range s.stats[c.idx] {
			st := &s.stats[c.idx][i]
			calls += st.calls.Load()
			usec += st.usec.Load()
			rejected += st.rejected.Load()
			failed += st.failed.Load()
		}
		if calls+rejected == 0 {
			continue
		}
		per := 0.0
		if calls > 0 {
			per = float64(usec) / float64(calls)
		}
		field("cmdstat_"+c.name, "calls="+strconv.FormatInt(calls, 10)+",usec="+strconv.FormatInt(usec, 10)+
			",usec_per_call="+strconv.FormatFloat(per, 'f', 2, 64)+",rejected_calls="+strconv.FormatInt(rejected, 10)+
			",failed_calls="+strconv.FormatInt(failed, 10))
	}
}

// call runs a command's handler and counts it.
func (s *Server) call(cmd *command, cl *client, args [][]byte) {
	errs := cl.w.errs
	start := time.Now()
	cmd.handler(s, cl, args)
	cl.ended = time.Now()
	st := s.stats[cmd.idx].of(cl)
	st.calls.Add(1)
	st.usec.Add(int64(cl.ended.Sub(start) / time.Microsecond))
	if cl.w.errs != errs {
		st.failed.Add(1)
	}
}
