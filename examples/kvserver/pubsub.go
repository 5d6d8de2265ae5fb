package main

import (
	"slices"
	"sync"
)

// pubsubLimit is the most bytes of messages a subscriber may have waiting
// before it is disconnected, as Redis's "client-output-buffer-limit pubsub
// 32mb": a subscriber that does not read must not hold the server's memory.
const pubsubLimit = 32 << 20

// pubsub indexes the subscribers of channels and patterns. A publisher
// only appends to each subscriber's outbox, so a slow subscriber never
// stalls PUBLISH or the expiry events.
type pubsub struct {
	mu       sync.RWMutex
	channels map[string]map[*client]struct{}
	patterns map[string]map[*client]struct{}
}

// message is one message waiting in an outbox.
type message struct {
	pattern string // the matching pattern of a pmessage
	pmsg    bool
	channel string
	payload string
}

// outbox holds a subscriber's messages until its pusher writes them.
type outbox struct {
	mu   sync.Mutex
	msgs []message
	size int
	wake chan struct{} // one pending wake-up
	stop chan struct{} // closed when the connection ends
	done chan struct{} // closed by the pusher on its way out
}

// subscribed returns the number of the client's channels and patterns.
func (cl *client) subscribed() int { return len(cl.subs) + len(cl.psubs) }

// pushes starts the client's pusher on its first subscription; the
// connection's goroutine owns it and stops it in stopPushes.
func (s *Server) pushes(cl *client) {
	if cl.box != nil {
		return
	}
	cl.box = &outbox{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	cl.subs, cl.psubs = make(map[string]struct{}), make(map[string]struct{})
	go s.push(cl)
}

// push writes a subscriber's messages as they arrive, taking the
// connection's output lock so that they fall between replies, never inside
// one, and after the reply of the SUBSCRIBE that asked for them.
func (s *Server) push(cl *client) {
	defer close(cl.box.done)
	for {
		select {
		case <-cl.box.stop:
			return
		case <-cl.box.wake:
		}
		cl.box.mu.Lock()
		msgs := cl.box.msgs
		cl.box.msgs, cl.box.size = nil, 0
		cl.box.mu.Unlock()
		cl.out.Lock()
		for _, m := range msgs {
			if m.pmsg {
				cl.w.Push(4)
				cl.w.Bulk("pmessage")
				cl.w.Bulk(m.pattern)
			} else {
				cl.w.Push(3)
				cl.w.Bulk("message")
			}
			cl.w.Bulk(m.channel)
			cl.w.Bulk(m.payload)
		}
		err := cl.w.Flush()
		cl.out.Unlock()
		if err != nil {
			_ = cl.conn.Close()
			return
		}
	}
}

// stopPushes ends the client's subscriptions and its pusher, when the
// connection ends.
func (s *Server) stopPushes(cl *client) {
	if cl.box == nil {
		return
	}
	s.unsubscribe(cl, false, nil, false)
	s.unsubscribe(cl, true, nil, false)
	_ = cl.conn.Close() // a pusher blocked writing gives up
	close(cl.box.stop)
	<-cl.box.done
}

// deliver queues m for cl; a subscriber past pubsubLimit is disconnected.
func (s *Server) deliver(cl *client, m message) {
	b := cl.box
	b.mu.Lock()
	b.size += len(m.channel) + len(m.payload) + len(m.pattern) + 64
	over := b.size > pubsubLimit
	if !over {
		b.msgs = append(b.msgs, m)
	} else {
		b.msgs, b.size = nil, 0
	}
	b.mu.Unlock()
	if over {
		s.log.Warn("kvserver: closing a subscriber over the pub/sub output limit", "remote", cl.conn.RemoteAddr())
		_ = cl.conn.Close()
		return
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// publish sends payload to channel's subscribers and to those of the
// patterns it matches, and returns how many received it.
func (s *Server) publish(channel, payload string) int64 {
	s.ps.mu.RLock()
	defer s.ps.mu.RUnlock()
	n := int64(0)
	for cl := range s.ps.channels[channel] {
		s.deliver(cl, message{channel: channel, payload: payload})
		n++
	}
	for pat, cls := range s.ps.patterns {
		if !globMatch(pat, channel) {
			continue
		}
		for cl := range cls {
			s.deliver(cl, message{pattern: pat, pmsg: true, channel: channel, payload: payload})
			n++
		}
	}
	return n
}

func subscribeCommand(pattern bool) func(*Server, *client, [][]byte) {
	kind := "subscribe"
	if pattern {
		kind = "psubscribe"
	}
	return func(s *Server, cl *client, args [][]byte) {
		s.pushes(cl)
		mine, index := cl.subs, &s.ps.channels
		if pattern {
			mine, index = cl.psubs, &s.ps.patterns
		}
		for _, a := range args[1:] {
			name := string(a)
			if _, ok := mine[name]; !ok {
				mine[name] = struct{}{}
				s.ps.mu.Lock()
				if *index == nil {
					*index = make(map[string]map[*client]struct{})
				}
				m := (*index)[name]
				if m == nil {
					m = make(map[*client]struct{})
					(*index)[name] = m
				}
				m[cl] = struct{}{}
				s.ps.mu.Unlock()
			}
			cl.w.Push(3)
			cl.w.Bulk(kind)
			cl.w.Bulk(name)
			cl.w.Int(int64(cl.subscribed()))
		}
	}
}

func unsubscribeCommand(pattern bool) func(*Server, *client, [][]byte) {
	return func(s *Server, cl *client, args [][]byte) {
		names := make([]string, 0, len(args)-1)
		for _, a := range args[1:] {
			names = append(names, string(a))
		}
		s.unsubscribe(cl, pattern, names, true)
	}
}

// unsubscribe removes the client from the named channels or patterns, or
// from all of them if names is empty, replying for each if reply is set.
func (s *Server) unsubscribe(cl *client, pattern bool, names []string, reply bool) {
	kind, mine, index := "unsubscribe", cl.subs, s.ps.channels
	if pattern {
		kind, mine, index = "punsubscribe", cl.psubs, s.ps.patterns
	}
	if len(names) == 0 {
		for name := range mine {
			names = append(names, name)
		}
		slices.Sort(names)
		if len(names) == 0 && reply {
			cl.w.Push(3)
			cl.w.Bulk(kind)
			cl.w.Null()
			cl.w.Int(int64(cl.subscribed()))
			return
		}
	}
	for _, name := range names {
		if _, ok := mine[name]; ok {
			delete(mine, name)
			s.ps.mu.Lock()
			delete(index[name], cl)
			if len(index[name]) == 0 {
				delete(index, name)
			}
			s.ps.mu.Unlock()
		}
		if reply {
			cl.w.Push(3)
			cl.w.Bulk(kind)
			cl.w.Bulk(name)
			cl.w.Int(int64(cl.subscribed()))
		}
	}
}

func cmdPublish(s *Server, cl *client, args [][]byte) {
	cl.w.Int(s.publish(string(args[1]), string(args[2])))
}

// subscribeMode reports whether a RESP2 client is subscribed, which
// confines it to the pub/sub commands, PING and QUIT, as in Redis: its
// connection carries messages, not replies.
func subscribeMode(cl *client, cmd *command) bool {
	if cl.w.resp3 || cl.subscribed() == 0 {
		return false
	}
	switch cmd.name {
	case "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "ping", "quit", "reset":
		return false
	}
	return true
}

// cmdPubsubChannels answers PUBSUB CHANNELS [pattern]: the channels with a
// subscriber, sorted.
func cmdPubsubChannels(s *Server, cl *client, args [][]byte) {
	if len(args) > 3 {
		cl.w.Error(errArity("pubsub|channels"))
		return
	}
	s.ps.mu.RLock()
	var names []string
	for name := range s.ps.channels {
		if len(args) == 2 || globMatch(string(args[2]), name) {
			names = append(names, name)
		}
	}
	s.ps.mu.RUnlock()
	slices.Sort(names)
	cl.w.Array(len(names))
	for _, n := range names {
		cl.w.Bulk(n)
	}
}

// cmdPubsubNumsub answers PUBSUB NUMSUB [channel ...]: each channel and
// its number of subscribers, in one flat array as Redis replies in both
// protocols.
func cmdPubsubNumsub(s *Server, cl *client, args [][]byte) {
	s.ps.mu.RLock()
	defer s.ps.mu.RUnlock()
	cl.w.Array(2 * (len(args) - 2))
	for _, a := range args[2:] {
		cl.w.BulkBytes(a)
		cl.w.Int(int64(len(s.ps.channels[string(a)])))
	}
}

func cmdPubsubNumpat(s *Server, cl *client, args [][]byte) {
	s.ps.mu.RLock()
	defer s.ps.mu.RUnlock()
	cl.w.Int(int64(len(s.ps.patterns)))
}

func cmdPubsubHelp(s *Server, cl *client, args [][]byte) {
	help(cl, "PUBSUB",
		"CHANNELS [<pattern>]",
		"    Return the currently active channels matching a <pattern> (default: '*').",
		"NUMPAT",
		"    Return number of subscriptions to patterns.",
		"NUMSUB [<channel> ...]",
		"    Return the number of subscribers for the specified channels, excluding",
		"    pattern subscriptions(default: no channels).")
}

// pingSubscribed is PING's reply to a RESP2 subscriber: an array, since a
// simple string could be taken for part of a message.
func pingSubscribed(cl *client, args [][]byte) {
	cl.w.Array(2)
	cl.w.Bulk("pong")
	if len(args) == 2 {
		cl.w.BulkBytes(args[1])
	} else {
		cl.w.Bulk("")
	}
}
