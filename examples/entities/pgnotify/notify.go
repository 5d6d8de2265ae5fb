// Package pgnotify wakes controllers in other processes through
// PostgreSQL's LISTEN/NOTIFY: a Notifier's WakeExpired is a
// ttl.RunnerOptions.Wake that sends the rules' decisions (ttl.Expiry: id,
// rule, desired state, the last activity it was based on, the decision
// time), chunked below the 8000-byte payload limit, and Wake sends bare
// ids; ListenExpired and Listen deliver them to a controller over a
// dedicated connection.
package pgnotify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/ttl"
)

// MaxPayload is the largest NOTIFY payload Wake sends, in bytes: PostgreSQL
// accepts payloads shorter than 8000 bytes.
const MaxPayload = 7999

var channelRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func validChannel(channel string) error {
	if !channelRE.MatchString(channel) {
		return entities.Invalid("pgnotify: channel %q is not a valid identifier (letters, digits, _; at most 63)", channel)
	}
	return nil
}

// Notifier wakes controllers in other processes: WakeExpired sends the
// decisions the rules made, and Wake bare ids, on a LISTEN/NOTIFY channel.
// Its WakeExpired method is a ttl.RunnerOptions.Wake.
type Notifier struct {
	pool    *pgxpool.Pool
	channel string
}

// NewNotifier returns a Notifier sending on channel through pool. The
// channel is an identifier of letters, digits and underscores.
func NewNotifier(pool *pgxpool.Pool, channel string) (*Notifier, error) {
	if pool == nil {
		return nil, entities.Invalid("pgnotify: pool is nil")
	}
	if err := validChannel(channel); err != nil {
		return nil, err
	}
	return &Notifier{pool: pool, channel: channel}, nil
}

// Wake sends ids as JSON arrays, split into as many notifications as
// needed to keep each payload within MaxPayload, all in one transaction: a
// listener gets all of them or, if Wake fails, none. An id too long for one
// payload fails with ErrInvalid before anything is sent. No ids is a
// no-op.
func (n *Notifier) Wake(ctx context.Context, ids []string) error {
	payloads, err := chunk(ids, MaxPayload)
	if err != nil || len(payloads) == 0 {
		return err
	}
	return n.send(ctx, payloads)
}

// send sends payloads in one transaction.
func (n *Notifier) send(ctx context.Context, payloads []string) error {
	err := pgx.BeginFunc(ctx, n.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, p := range payloads {
			b.Queue(`SELECT pg_notify($1, $2)`, n.channel, p)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return entities.Wrap(ctx, "pgnotify", "notify "+n.channel, err)
	}
	return nil
}

// WakeExpired sends the decisions in exps, each as a JSON object
//
//	{"id":"ws-1","rule":"standby","then":"STANDBY",
//	 "last_activity_at":"2026-02-07T10:00:00.123456Z","decided_at":"..."}
//
// in arrays split and sent as Wake does. A ListenExpired callback gets them
// back as ttl.Expiry values; a Listen callback gets their ids.
func (n *Notifier) WakeExpired(ctx context.Context, exps []ttl.Expiry) error {
	elems := make([]any, len(exps))
	for i, x := range exps {
		elems[i] = wireExpiry{ID: x.ID, Rule: x.Rule, Then: x.Then, LastActivityAt: x.LastActivityAt, DecidedAt: x.DecidedAt}
	}
	payloads, err := chunkJSON(elems, MaxPayload)
	if err != nil || len(payloads) == 0 {
		return err
	}
	return n.send(ctx, payloads)
}

// wireExpiry is a ttl.Expiry in a NOTIFY payload.
type wireExpiry struct {
	ID             string    `json:"id"`
	Rule           string    `json:"rule,omitempty"`
	Then           string    `json:"then,omitempty"`
	LastActivityAt time.Time `json:"last_activity_at,omitzero"`
	DecidedAt      time.Time `json:"decided_at,omitzero"`
}

// chunk encodes ids as JSON arrays of at most limit bytes each.
func chunk(ids []string, limit int) ([]string, error) {
	elems := make([]any, len(ids))
	for i, id := range ids {
		elems[i] = id
	}
	return chunkJSON(elems, limit)
}

// chunkJSON encodes elems as JSON arrays of at most limit bytes each.
func chunkJSON(elems []any, limit int) ([]string, error) {
	var (
		out []string
		buf = []byte{'['}
	)
	for _, el := range elems {
		enc, err := json.Marshal(el)
		if err != nil {
			return nil, fmt.Errorf("pgnotify: notify: %w", err)
		}
		if len(enc)+2 > limit {
			return nil, entities.Invalid("pgnotify: notify: element of %d bytes does not fit a payload of %d", len(enc), limit)
		}
		// +1 for the separator or the closing bracket.
		if len(buf) > 1 && len(buf)+1+len(enc)+1 > limit {
			out = append(out, string(append(buf, ']')))
			buf = append(buf[:0], '[')
		}
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(buf, enc...)
	}
	if len(buf) > 1 {
		out = append(out, string(append(buf, ']')))
	}
	return out, nil
}

// parsePayload decodes a Wake or WakeExpired payload. A payload that is
// neither a JSON array of strings nor one of objects (a hand-written NOTIFY
// channel, 'ws-1') is taken as one id; an empty one as no ids.
func parsePayload(p string) []ttl.Expiry {
	if p == "" {
		return nil
	}
	var ids []string
	if err := json.Unmarshal([]byte(p), &ids); err == nil {
		out := make([]ttl.Expiry, len(ids))
		for i, id := range ids {
			out[i] = ttl.Expiry{ID: id}
		}
		return out
	}
	var ws []wireExpiry
	if err := json.Unmarshal([]byte(p), &ws); err == nil {
		out := make([]ttl.Expiry, len(ws))
		for i, w := range ws {
			out[i] = ttl.Expiry{ID: w.ID, Rule: w.Rule, Then: w.Then, LastActivityAt: w.LastActivityAt, DecidedAt: w.DecidedAt}
		}
		return out
	}
	return []ttl.Expiry{{ID: p}}
}

// ListenOptions configure a Listener. The zero value means defaults.
type ListenOptions struct {
	// RetryInterval is how long the Listener waits before reconnecting
	// after its connection failed. 0 means 1 s.
	RetryInterval time.Duration
	// OnError, if set, receives connection failures, from the Listener's
	// goroutine. It must not block.
	OnError func(error)
}

// defaultRetryInterval is ListenOptions.RetryInterval's default.
const defaultRetryInterval = time.Second

// Listener receives the ids sent by Notifiers on one channel, on a
// dedicated connection taken out of the pool, and calls a function with
// them from its own goroutine. Close stops it.
type Listener struct {
	pool    *pgxpool.Pool
	channel string
	fn      func(exps []ttl.Expiry)
	opts    ListenOptions

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// Listen takes a connection from pool for good, LISTENs on channel and
// returns once the server has confirmed, so every notification sent after
// Listen returns reaches fn. fn is called with the ids of each notification,
// one call at a time, from the Listener's goroutine.
//
// When the connection fails, the Listener reconnects every RetryInterval
// until it can LISTEN again, and then calls fn(nil): notifications sent
// while it was disconnected are lost, so a nil call means "reconcile
// everything". ctx bounds only the first connection.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, fn func(ids []string), opts ListenOptions) (*Listener, error) {
	if fn == nil {
		return nil, entities.Invalid("pgnotify: listen function is nil")
	}
	return ListenExpired(ctx, pool, channel, func(exps []ttl.Expiry) {
		if exps == nil {
			fn(nil)
			return
		}
		ids := make([]string, len(exps))
		for i, x := range exps {
			ids[i] = x.ID
		}
		fn(ids)
	}, opts)
}

// ListenExpired is Listen for a controller that wants the decisions
// WakeExpired sends: fn gets them as ttl.Expiry values, with the rule, the
// desired state it set, the entity's LastActivityAt the rule saw and the
// server's now when it decided. Ids sent by Wake (or a hand-written NOTIFY)
// arrive as an Expiry with only ID set. fn(nil) still means "reconcile
// everything" (see Listen).
func ListenExpired(ctx context.Context, pool *pgxpool.Pool, channel string, fn func(exps []ttl.Expiry), opts ListenOptions) (*Listener, error) {
	switch {
	case pool == nil:
		return nil, entities.Invalid("pgnotify: pool is nil")
	case fn == nil:
		return nil, entities.Invalid("pgnotify: listen function is nil")
	case opts.RetryInterval < 0:
		return nil, entities.Invalid("pgnotify: RetryInterval (%v) is negative", opts.RetryInterval)
	}
	if err := validChannel(channel); err != nil {
		return nil, err
	}
	if opts.RetryInterval == 0 {
		opts.RetryInterval = defaultRetryInterval
	}
	l := &Listener{pool: pool, channel: channel, fn: fn, opts: opts, done: make(chan struct{})}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(runCtx, conn)
	return l, nil
}

// connect takes a connection out of the pool and LISTENs on it.
func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, entities.Wrap(ctx, "pgnotify", "listen "+l.channel, err)
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, `LISTEN "`+l.channel+`"`); err != nil {
		closeConn(conn)
		return nil, entities.Wrap(ctx, "pgnotify", "listen "+l.channel, err)
	}
	return conn, nil
}

func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	for {
		if conn == nil {
			t := time.NewTimer(l.opts.RetryInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			c, err := l.connect(ctx)
			if err != nil {
				l.report(ctx, err)
				continue
			}
			conn = c
			l.fn(nil)
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.report(ctx, entities.Wrap(ctx, "pgnotify", "listen "+l.channel, err))
			closeConn(conn)
			conn = nil
			continue
		}
		l.fn(parsePayload(n.Payload))
	}
}

// closeConn closes a connection the Listener owns, bounding the goodbye
// to the server so that a hung network cannot stall Close.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

func (l *Listener) report(ctx context.Context, err error) {
	if l.opts.OnError != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		l.opts.OnError(err)
	}
}

// Close stops listening, waits for the goroutine (and a call of fn in
// progress) to end and closes the connection. When ctx ends first, it
// returns an error that wraps context.Cause(ctx): fn is still running.
// Close is idempotent: a later call waits the same way and returns nil once
// the goroutine has stopped. Calling it from fn with a ctx that never ends
// deadlocks: fn runs on the goroutine Close waits for.
func (l *Listener) Close(ctx context.Context) error {
	l.closeOnce.Do(l.cancel)
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pgnotify: listener on %s: callback still running: %w", l.channel, context.Cause(ctx))
	}
}
