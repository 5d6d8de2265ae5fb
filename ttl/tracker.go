package ttl

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Defaults of TrackerOptions and RunnerOptions, as their fields document
// them.
const (
	defaultFlushInterval = 30 * time.Second
	defaultResolution    = time.Second
	defaultMinShards     = 16
	defaultBatchSize     = 1000
	defaultInterval      = 60 * time.Second
	defaultRetain        = 5 * time.Minute
)

// TrackerOptions configures a Tracker. The zero value means defaults.
type TrackerOptions struct {
	// FlushInterval is how often the loop flushes: 30 s if zero; no loop if
	// negative (call Flush). A Paced Sink notes it for the Runner's hold.
	FlushInterval time.Duration
	// Resolution is how late Record may stamp activity, never early: 1 s if
	// zero; negative reads the clock on every Record. A clock refresh run
	// late on a loaded machine adds its lateness. Under testing/synctest,
	// call synctest.Wait after time.Sleep, or use a negative value.
	Resolution time.Duration
	// Shards is the number of separately locked parts of the buffer, rounded
	// up to a power of two, at most 65536: 4 × GOMAXPROCS, at least 16, if zero.
	Shards    int
	BatchSize int // most activities per Sink.Add: 1000 if zero
	// Retain is how long, with a Lossy Sink, a flushed id is kept to resend
	// after a loss: 5 minutes if zero; negative is an error. Make it at least
	// 2 × FlushInterval + the Runner's Interval + the longest Sink outage.
	// With other Sinks, a flushed id is kept one more FlushInterval.
	Retain time.Duration

	Clock      clock.Clock  // nil means real time
	Logger     *slog.Logger // flush failures and the first dropped event; nil means none
	OnEvent    func(Event)  // if set, gets EventFlush (flushes that sent) and EventBufferLost
	EventQueue int          // OnEvent's queue (see Event): 1024 if zero; negative is an error
}

// Tracker records activity in memory and flushes it to a [Sink] every
// FlushInterval, keeping what a flush fails to send.
type Tracker struct {
	sink      Sink
	lossy     Lossy         // sink's generation, if it has one
	paced     Paced         // sink's notes of FlushInterval, if it keeps them
	interval  time.Duration // FlushInterval
	retain    int64         // ns; with lossy only
	clock     clock.Clock
	batchSize int
	logger    *slog.Logger
	events    *eventQueue

	seed   maphash.Seed
	mask   uint64
	shards []shard
	// now is the coarse clock in Unix nanoseconds, rounded up (the last
	// reading plus resolution), or readClock. Record reads it under its
	// shard's lock (see refresh).
	now        atomic.Int64
	resolution int64      // 0: Record always reads the clock
	clockMu    sync.Mutex // serializes refresh and take

	flushMu   sync.Mutex // serializes Flush; guards gen
	gen       string     // the sink generation seen last, "" if none yet
	flushes   atomic.Uint64
	resent    atomic.Uint64
	losses    atomic.Uint64
	flushed   atomic.Uint64
	errors    atomic.Uint64
	lastFlush atomic.Int64 // Unix nanoseconds of the last successful flush

	closeOnce sync.Once
	flushOnce sync.Once // the final flush of Close
	cancel    context.CancelFunc
	done      chan struct{} // closed by Close: the loops stop
	stopped   chan struct{} // closed when the loops have stopped
	wg        sync.WaitGroup
}

// readClock in Tracker.now makes Record read the clock itself.
const readClock = math.MinInt64

type shard struct {
	mu      sync.Mutex
	m       map[string]int64 // id -> packed time, see pack
	records uint64
	// Shards are padded apart so that two cores locking neighbours do not
	// fight over one cache line.
	_ [104]byte
}

// An id's buffered time and two flags share one int64 (Unix nanoseconds
// whose two lowest bits are the flags), which keeps map slots small: the
// map probe is most of Record's cost once the buffer outgrows the CPU
// caches. Times are thus kept to 4 ns, rounded up.
const (
	// dirty: changed since the last flush.
	dirty = 1
	// coarse: a Record used the coarse clock on this slot since its time
	// was last checked against a reading of the clock, so its time may
	// still have to move up (see refresh).
	coarse = 2
	flags  = dirty | coarse
)

// timeOf returns the time packed in v.
func timeOf(v int64) int64 { return v &^ flags }

// roundUp rounds Unix nanoseconds up to the precision slots keep, so that
// a time is never packed earlier than it is.
func roundUp(ns int64) int64 { return (ns + flags) &^ flags }

// NewTracker starts a Tracker flushing to sink; stop it with Close. Bad
// options return an error that names the field and matches [ErrInvalid].
func NewTracker(sink Sink, opts TrackerOptions) (*Tracker, error) {
	switch {
	case sink == nil:
		return nil, errs.Invalid(ErrInvalid, "ttl: tracker sink is nil")
	case opts.Shards < 0:
		return nil, errs.Invalid(ErrInvalid, "ttl: tracker Shards (%d) is negative", opts.Shards)
	case opts.Shards > 1<<16:
		return nil, errs.Invalid(ErrInvalid, "ttl: tracker Shards (%d) is above 65536", opts.Shards)
	case opts.BatchSize < 0:
		return nil, errs.Invalid(ErrInvalid, "ttl: tracker BatchSize (%d) is negative", opts.BatchSize)
	case opts.Retain < 0:
		return nil, errs.Invalid(ErrInvalid, "ttl: tracker Retain (%v) is negative", opts.Retain)
	}
	if err := event.CheckSize("ttl: tracker", "EventQueue", opts.EventQueue); err != nil {
		return nil, errs.Invalid(ErrInvalid, "%v", err)
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = defaultFlushInterval
	}
	if opts.Resolution == 0 {
		opts.Resolution = defaultResolution
	}
	if opts.Shards == 0 {
		opts.Shards = max(defaultMinShards, 4*runtime.GOMAXPROCS(0))
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = defaultBatchSize
	}
	if opts.Retain == 0 {
		opts.Retain = defaultRetain
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	n := 1
	for n < opts.Shards {
		n <<= 1
	}
	lossy, _ := sink.(Lossy)
	paced, _ := sink.(Paced)
	t := &Tracker{
		sink:      sink,
		lossy:     lossy,
		paced:     paced,
		interval:  opts.FlushInterval,
		retain:    int64(opts.Retain),
		clock:     opts.Clock,
		batchSize: opts.BatchSize,
		logger:    opts.Logger,
		events:    newEventQueue(opts.OnEvent, opts.EventQueue, opts.Logger, "ttl: tracker"),
		seed:      maphash.MakeSeed(),
		mask:      uint64(n - 1),
		shards:    make([]shard, n),
		done:      make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	for i := range t.shards {
		t.shards[i].m = make(map[string]int64)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	if opts.Resolution > 0 {
		t.resolution = int64(opts.Resolution)
		t.now.Store(roundUp(t.clock.Now().UnixNano() + t.resolution))
		t.wg.Add(1)
		// Twice per Resolution, so that a reading is replaced well before
		// it passes, unless the machine is loaded (see refresh).
		go t.tickClock(t.clock.Ticker(max(opts.Resolution/2, 1)))
	} else {
		t.now.Store(readClock)
	}
	// Tickers are made here, not in the goroutines, so that a mock clock
	// advanced right after NewTracker returns already drives them.
	if opts.FlushInterval > 0 {
		t.wg.Add(1)
		go t.loop(ctx, t.clock.Ticker(opts.FlushInterval))
	}
	return t, nil
}

// tickClock refreshes the coarse clock on every tick until Close.
func (t *Tracker) tickClock(tk *clock.Ticker) {
	defer t.wg.Done()
	defer tk.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tk.C:
			t.refresh(false)
		}
	}
}

// refresh replaces the coarse clock's reading with a new one or, when
// final, makes Record read the clock itself from then on.
//
// A reading plus Resolution is a time no Record can be past as long as the
// next refresh comes before it. When the refresh comes later (the machine
// too loaded to run it), Records may have used the reading after it
// passed, stamping activity earlier than it was. refresh finds every one
// of them: Record reads the coarse clock under its shard's lock, and the
// reading is withdrawn before the clock is read here, so each Record that
// used it is in its slot, flagged coarse, and happened before this
// reading. settle moves those slots up to it.
func (t *Tracker) refresh(final bool) {
	t.clockMu.Lock()
	defer t.clockMu.Unlock()
	old := t.now.Swap(readClock) // Records read the clock meanwhile
	now := roundUp(t.clock.Now().UnixNano())
	if old != readClock && now > old {
		t.settle(old, now)
	}
	if !final {
		t.now.Store(roundUp(now + t.resolution))
	}
}

// settle moves every slot flagged coarse whose time is at or past stale,
// the coarse clock's reading that passed, up to now, a reading of the
// clock taken after it was withdrawn, and clears every coarse flag: the
// earlier readings were settled when they were replaced. The caller holds
// clockMu.
func (t *Tracker) settle(stale, now int64) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for id, v := range s.m {
			if v&coarse != 0 {
				s.m[id] = settled(v, stale, now)
			}
		}
		s.mu.Unlock()
	}
}

// settled returns slot v, flagged coarse, with its coarse flag cleared and,
// when its time is at or past stale, moved up to now (see settle).
func settled(v, stale, now int64) int64 {
	if at := timeOf(v); at >= stale && at < now {
		return now | dirty
	}
	return v &^ coarse
}

// loop flushes on every tick until Close.
func (t *Tracker) loop(ctx context.Context, tk *clock.Ticker) {
	defer t.wg.Done()
	defer tk.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tk.C:
			if _, err := t.Flush(ctx); err != nil {
				t.logger.Warn("ttl: tracker flush failed; activity kept for the next flush", "err", err)
			}
		}
	}
}

// Record notes that entity id is active now. It is safe for concurrent use
// and allocates only when id enters the buffer.
func (t *Tracker) Record(id string) {
	// The buffer is split into shards locked separately, chosen by a hash
	// of the id. Flushed ids stay in their shard, marked clean, so a
	// steadily active id never allocates (see take). The time comes from a
	// clock reading refreshed twice per Resolution, rounded up: reading
	// the clock would be most of Record's cost.
	s := t.shardOf(id)
	if t.resolution == 0 {
		now := roundUp(t.clock.Now().UnixNano())
		s.mu.Lock()
		s.put(id, now, 0)
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	// Read under the lock, so that a refresh that finds this reading
	// passed also finds this slot (see refresh).
	now, flag := t.now.Load(), int64(coarse)
	if now == readClock {
		now, flag = roundUp(t.clock.Now().UnixNano()), 0
	}
	s.put(id, now, flag)
	s.mu.Unlock()
}

// recordAt notes that entity id was active at at, for the tests. A time
// older than the one buffered for id changes nothing. A time that Unix
// nanoseconds in an int64 cannot hold (before 1678 or after 2262), such as
// the zero Time, is ignored: it would wrap around to an unrelated date,
// possibly one far in the future that keeps the entity active for good.
func (t *Tracker) recordAt(id string, at time.Time) {
	if at.Before(minTime) || at.After(maxTime) {
		return
	}
	s := t.shardOf(id)
	s.mu.Lock()
	s.put(id, roundUp(at.UnixNano()), 0)
	s.mu.Unlock()
}

// minTime and maxTime bound the times recordAt accepts.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64&^flags)
)

// shardOf returns the shard that holds id.
func (t *Tracker) shardOf(id string) *shard {
	return &t.shards[maphash.String(t.seed, id)&t.mask]
}

// put merges time at, with flag (coarse or 0), into id's slot. The caller
// holds s.mu.
func (s *shard) put(id string, at, flag int64) {
	s.records++
	v, ok := s.m[id]
	switch {
	case !ok:
		// Cloned so that the buffer never pins a caller's larger string,
		// such as the request path the id was sliced from, nor shares a
		// byte buffer the caller reuses.
		s.m[strings.Clone(id)] = at | flag | dirty
	case at > timeOf(v):
		s.m[id] = at | v&coarse | flag | dirty
	case flag&^v != 0:
		// A coarse time the buffered one covers, unless the coarse clock
		// has passed: flagged, so that refresh or take finds out.
		s.m[id] = v | flag
	}
	// Otherwise the buffered time already covers at: pending, or flushed.
}

// FlushResult is what one Flush did.
type FlushResult struct {
	Flushed int // activities handed to the Sink, Resent included
	Kept    int // activities kept for the next flush: the Sink refused them or ctx ended
	Resent  int // activities sent again after a Lossy Sink's loss
}

// Flush sends what was recorded since the last flush in batches of
// BatchSize, keeping the failed batch and the rest for the next flush. If
// a [Lossy] Sink's generation changed, it then resends what it retains
// ([TrackerOptions.Retain]).
// Concurrent calls run one at a time; after Close, events are not delivered.
func (t *Tracker) Flush(ctx context.Context) (FlushResult, error) {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	// A generation that cannot be read is read again at the next flush.
	if t.lossy != nil && t.gen == "" {
		// The generation the first batch goes to, so that a loss right
		// after it is seen.
		if g, err := t.lossy.Generation(ctx); err == nil {
			t.gen = g
		}
	}
	acts := t.take()
	res, err := t.send(ctx, acts)
	if err != nil || t.lossy == nil || (len(acts) == 0 && t.held() == 0) {
		return res, err
	}
	g, gerr := t.lossy.Generation(ctx)
	if gerr != nil {
		return res, nil
	}
	lost := t.gen != "" && g != t.gen
	t.gen = g
	if !lost {
		return res, nil
	}
	n := t.markDirty()
	t.losses.Add(1)
	t.emit(Event{Kind: EventBufferLost, Count: n})
	t.logger.Warn("ttl: tracker found its sink lost; sending retained activity again", "count", n)
	again, err := t.send(ctx, t.take())
	t.resent.Add(uint64(again.Flushed))
	res.Flushed += again.Flushed
	res.Kept += again.Kept
	res.Resent = again.Flushed
	return res, err
}

// send hands acts to the Sink in batches; see Flush.
func (t *Tracker) send(ctx context.Context, acts []Activity) (FlushResult, error) {
	if len(acts) == 0 {
		return FlushResult{}, nil
	}
	t.flushes.Add(1)
	if t.paced != nil && t.interval > 0 {
		// Before the activity, so that a Runner that can read the activity
		// knows how long this Tracker may take to send it again. A failure
		// is not the flush's: the next flush notes it again, and meanwhile
		// a Runner holds for what it knew, or for its default.
		_ = t.paced.NoteFlushInterval(ctx, t.interval)
	}
	sent := 0
	var err error
	for sent < len(acts) {
		if err = context.Cause(ctx); err != nil {
			break
		}
		batch := acts[sent:min(sent+t.batchSize, len(acts))]
		if err = t.sink.Add(ctx, batch); err != nil {
			break
		}
		sent += len(batch)
		t.flushed.Add(uint64(len(batch)))
	}
	if err != nil {
		t.restore(acts[sent:])
		t.errors.Add(1)
		err = fmt.Errorf("ttl: flush of %d activities: %w", len(acts)-sent, err)
		t.emit(Event{Kind: EventFlush, Count: len(acts) - sent, Err: err})
		return FlushResult{Flushed: sent, Kept: len(acts) - sent}, err
	}
	t.lastFlush.Store(t.clock.Now().UnixNano())
	t.emit(Event{Kind: EventFlush, Count: len(acts)})
	return FlushResult{Flushed: len(acts)}, nil
}

// take collects the dirty slots and marks them clean, and drops the clean
// slots that are no longer needed: with a Lossy sink those older than
// Retain, else those that stayed clean for a whole interval.
//
// It settles each shard first, as refresh does, if the coarse clock's
// reading has passed: the refresh is late, and take must not send a time
// that came from that reading unchecked.
func (t *Tracker) take() []Activity {
	t.clockMu.Lock()
	defer t.clockMu.Unlock()
	var acts []Activity
	oldest := int64(math.MaxInt64) // drop every clean slot
	if t.lossy != nil {
		oldest = t.clock.Now().UnixNano() - t.retain
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		stale, now := t.passed()
		for id, v := range s.m {
			if v&coarse != 0 {
				v = settled(v, stale, now)
				s.m[id] = v
			}
			if v&dirty == 0 {
				if timeOf(v) < oldest {
					delete(s.m, id)
				}
				continue
			}
			acts = append(acts, Activity{ID: id, At: time.Unix(0, timeOf(v))})
			s.m[id] = timeOf(v)
		}
		s.mu.Unlock()
	}
	return acts
}

// passed returns the coarse clock's reading and a reading of the clock
// taken now, rounded up, if the coarse one has passed; otherwise it returns
// math.MaxInt64, which no slot's time reaches. The caller holds clockMu and
// the lock of the shard it settles, so that every Record that used the
// reading in that shard happened before now.
func (t *Tracker) passed() (stale, now int64) {
	if t.resolution == 0 {
		return math.MaxInt64, 0
	}
	cur := t.now.Load()
	if cur == readClock {
		return math.MaxInt64, 0 // settled when it was withdrawn
	}
	if now = roundUp(t.clock.Now().UnixNano()); now > cur {
		return cur, now
	}
	return math.MaxInt64, 0
}

// markDirty marks every slot dirty, so that the next take sends it again,
// and returns how many there are.
func (t *Tracker) markDirty() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for id, v := range s.m {
			s.m[id] = v | dirty
		}
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// held returns the number of slots, pending or retained.
func (t *Tracker) held() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// restore merges acts back after a failed flush, greater wins.
func (t *Tracker) restore(acts []Activity) {
	for _, a := range acts {
		at := roundUp(a.At.UnixNano())
		s := t.shardOf(a.ID)
		s.mu.Lock()
		if v, ok := s.m[a.ID]; ok {
			at = max(at, timeOf(v)) | v&coarse
		}
		s.m[a.ID] = at | dirty
		s.mu.Unlock()
	}
}

// emit queues e for OnEvent, if there is one.
func (t *Tracker) emit(e Event) {
	if t.events.Enabled() {
		e.Time = t.clock.Now()
		t.events.Send(e)
	}
}

// Close stops the loop, flushes once more with ctx, delivers the queued
// events and waits for OnEvent. It returns the flush's error, or one
// wrapping context.Cause(ctx) if ctx ends first. Later calls wait the same
// way and return nil. Activity recorded after Close waits for a Flush.
func (t *Tracker) Close(ctx context.Context) error {
	t.closeOnce.Do(func() {
		close(t.done)
		t.cancel()
		go func() {
			t.wg.Wait()
			close(t.stopped)
		}()
	})
	select {
	case <-t.stopped:
	case <-ctx.Done():
		return fmt.Errorf("ttl: tracker: flush loop still running: %w", context.Cause(ctx))
	}
	var err error
	t.flushOnce.Do(func() {
		t.refresh(true)
		_, err = t.Flush(ctx)
	})
	return errors.Join(err, t.events.Close(ctx))
}

// TrackerStats is a snapshot of a Tracker's counters and gauges.
type TrackerStats struct {
	Records       uint64    // Record calls
	Pending       int       // ids recorded since the last flush
	Buffered      int       // ids held, pending or retained
	Flushes       uint64    // flushes that had something to send
	Flushed       uint64    // activities handed to the Sink
	FlushErrors   uint64    // failed flushes
	SinkLosses    uint64    // losses of a Lossy Sink seen
	Resent        uint64    // activities sent again after a loss
	LastFlush     time.Time // end of the last successful flush; zero if none
	EventsDropped uint64    // events dropped (see Event)
}

// Stats returns the tracker's counters. It locks every shard in turn: call
// it for monitoring, not per request.
func (t *Tracker) Stats() TrackerStats {
	st := TrackerStats{
		Flushes:       t.flushes.Load(),
		Flushed:       t.flushed.Load(),
		FlushErrors:   t.errors.Load(),
		SinkLosses:    t.losses.Load(),
		Resent:        t.resent.Load(),
		EventsDropped: t.events.Dropped(),
	}
	if n := t.lastFlush.Load(); n != 0 {
		st.LastFlush = time.Unix(0, n)
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		st.Records += s.records
		st.Buffered += len(s.m)
		for _, v := range s.m {
			st.Pending += int(v & dirty)
		}
		s.mu.Unlock()
	}
	return st
}
