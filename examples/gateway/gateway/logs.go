package gateway

import (
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// The log of an invocation, as Lambda returns it to a caller that asks for
// its tail (X-Amz-Log-Type: Tail): what the worker wrote on stdout and
// stderr during the invocation, between the START, END and REPORT lines
// Lambda prints, the last 4 KB of it base64-encoded in X-Amz-Log-Result.

// LogTail is the most of an invocation's log X-Amz-Log-Result holds, as
// Lambda's (4 KB).
const LogTail = 4 << 10

// Logs keeps the recent output of each worker, so that an invocation can
// return its tail. Give its Writer to the agent (agent.Options.WorkerOutput)
// and the Logs to the gateway (Config.Logs). A worker's output travels
// through a pipe: the lines it wrote just before its result may arrive a
// moment after it, which an invocation that asks for its tail waits for,
// briefly (until the output has been quiet for 50 ms, at most 500 ms).
type Logs struct {
	mu      sync.Mutex
	workers map[string]*workerLog
}

// workerLog is one worker's output: the last LogTail bytes, and how many
// were ever written.
type workerLog struct {
	buf     []byte
	written int64
	last    time.Time // of the last write
}

// NewLogs returns an empty Logs.
func NewLogs() *Logs { return &Logs{workers: map[string]*workerLog{}} }

// Writer returns the writer of the output of the worker called key (its
// key on the Runtime API). The gateway forgets a worker's output when it
// destroys the worker; a write after that is discarded.
func (l *Logs) Writer(key string) io.Writer {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.workers[key]; !ok {
		l.workers[key] = &workerLog{}
	}
	return logWriter{l, key}
}

type logWriter struct {
	l   *Logs
	key string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	wl, ok := w.l.workers[w.key]
	if !ok {
		return len(p), nil
	}
	wl.buf = append(wl.buf, p...)
	if len(wl.buf) > LogTail {
		wl.buf = append(wl.buf[:0], wl.buf[len(wl.buf)-LogTail:]...)
	}
	wl.written += int64(len(p))
	wl.last = time.Now()
	return len(p), nil
}

// mark returns how much worker key has written so far; ok is false for a
// worker whose output the gateway does not see.
func (l *Logs) mark(key string) (n int64, ok bool) {
	if l == nil {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	wl, ok := l.workers[key]
	if !ok {
		return 0, false
	}
	return wl.written, true
}

// since returns what worker key wrote after mark (at most its last
// LogTail bytes), once it has written nothing for quiet since the call, or
// after max.
func (l *Logs) since(key string, mark int64, quiet, max time.Duration) []byte {
	called := time.Now()
	deadline := called.Add(max)
	for {
		l.mu.Lock()
		wl, ok := l.workers[key]
		if !ok {
			l.mu.Unlock()
			return nil
		}
		last := wl.last
		if last.Before(called) {
			last = called
		}
		idle := time.Since(last)
		if idle >= quiet || !time.Now().Before(deadline) {
			n := min(wl.written-mark, int64(len(wl.buf)))
			out := append([]byte(nil), wl.buf[int64(len(wl.buf))-n:]...)
			l.mu.Unlock()
			return out
		}
		l.mu.Unlock()
		time.Sleep(min(quiet-idle, time.Until(deadline)))
	}
}

// forget drops worker key's output.
func (l *Logs) forget(key string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.workers, key)
}

// logResult returns X-Amz-Log-Result: the last LogTail bytes of the log
// of invocation id of version, whose worker wrote output, which took d
// with memoryMB, and ended with note (a timeout's or a crash's line, or
// nothing), base64-encoded. The lines are Lambda's.
func logResult(id, version string, output []byte, d time.Duration, memoryMB int, note string) string {
	ms := float64(d.Microseconds()) / 1000
	log := fmt.Appendf(nil, "START RequestId: %s Version: %s\n", id, version)
	log = append(log, output...)
	if len(output) > 0 && output[len(output)-1] != '\n' {
		log = append(log, '\n')
	}
	if note != "" {
		log = append(log, note...)
		log = append(log, '\n')
	}
	log = fmt.Appendf(log, "END RequestId: %s\nREPORT RequestId: %s\tDuration: %.2f ms\tBilled Duration: %d ms\tMemory Size: %d MB\t\n",
		id, id, ms, int64(math.Ceil(ms)), memoryMB)
	if len(log) > LogTail {
		log = log[len(log)-LogTail:]
	}
	return base64.StdEncoding.EncodeToString(log)
}
