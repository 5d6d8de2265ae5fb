package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"unsafe"
)

// Default protocol limits. They are Redis's: proto-max-bulk-len (512 MB), the
// inline request cap (64 KB) and client-query-buffer-limit (1 GB) for one
// whole command. The argument count is capped lower than Redis's INT_MAX.
const (
	DefaultMaxBulkLen  = 512 << 20
	DefaultMaxArgs     = 1 << 20
	DefaultMaxInline   = 64 << 10
	DefaultMaxQueryLen = 1 << 30
)

// flushAt is how many bytes of replies a pipeline buffers before the server
// sends them, and maxIdleReplyBuffer the most reply buffer a connection
// keeps between flushes.
const (
	flushAt            = 16 << 10
	maxIdleReplyBuffer = 64 << 10
)

// allocChunk is the most that the parser allocates ahead of data that has
// actually arrived: a declared length never buys more than this up front.
const allocChunk = 64 << 10

// Limits bound what one request may make the parser hold in memory.
// A zero field means its default.
type Limits struct {
	// MaxBulkLen is the largest accepted bulk string, in bytes.
	MaxBulkLen int64
	// MaxArgs is the largest accepted number of arguments in one command.
	MaxArgs int
	// MaxInline is the longest accepted inline (telnet-style) command line.
	MaxInline int
	// MaxQueryLen bounds the total size of one command's arguments.
	MaxQueryLen int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxBulkLen <= 0 {
		l.MaxBulkLen = DefaultMaxBulkLen
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = DefaultMaxArgs
	}
	if l.MaxInline <= 0 {
		l.MaxInline = DefaultMaxInline
	}
	if l.MaxQueryLen <= 0 {
		l.MaxQueryLen = DefaultMaxQueryLen
	}
	return l
}

// ProtocolError is malformed input. The server answers it with
// "ERR Protocol error: <Msg>" and closes the connection, as Redis does,
// because it can no longer tell where the next command starts.
type ProtocolError struct {
	Msg string
}

// Error returns the message Redis sends for the same fault.
func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

func protoErr(format string, args ...any) error {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// Reader parses client commands: RESP arrays of bulk strings, and inline
// commands (a line of space-separated words) for telnet users.
//
// It parses in place: the arguments it returns are views of its read
// buffer, valid until the next ReadCommand, so that the common command
// costs no allocation. An argument of bigArg bytes or more is read into an
// allocation of its own instead (Owned reports it), which a command may
// keep without copying: a large value is then held once, at its size.
type Reader struct {
	rd io.Reader
	// wait, if set, blocks until the connection is readable; the Reader
	// then gives its buffer back while the connection is idle.
	wait func()
	lim  Limits
	buf  []byte
	cs   int // start of the command being parsed
	w    int // end of the data read
	err  error
	refs []argRef
	args [][]byte
	// inline reports whether the last command was an inline line.
	inline bool
}

// argRef is a parsed argument: at off (from the command's start) in the
// buffer, or an allocation of its own.
type argRef struct {
	off, n int
	own    []byte
}

// Sizes of the read buffer: it starts at readBufSize and returns to it
// after a command that made it grow past maxIdleReadBuffer.
const (
	readBufSize       = 4 << 10
	maxIdleReadBuffer = 64 << 10
	// bigArg is the size from which a bulk string gets an allocation of
	// its own (Redis's PROTO_MBULK_BIG_ARG).
	bigArg = 32 << 10
	// exactAfter is how much of a large bulk string must have arrived
	// before the reader allocates the string's exact size.
	exactAfter = 1 << 20
)

// bufPool holds the read buffers of connections that are idle.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, readBufSize)
	return &b
}}

// NewReader returns a Reader that parses commands from r within lim.
func NewReader(r io.Reader, lim Limits) *Reader {
	return &Reader{rd: r, lim: lim.withDefaults()}
}

// Inline reports whether the command ReadCommand returned last was an
// inline (telnet-style) line rather than a RESP array.
func (r *Reader) Inline() bool { return r.inline }

// Buffered reports how many bytes are already read from the connection and
// not yet parsed; the server flushes its replies when there are none, so a
// pipeline of commands gets its replies in one write.
func (r *Reader) Buffered() int { return r.w - r.cs }

// Owned reports whether argument i of the last command is an allocation of
// its own that the caller may keep after the next ReadCommand.
func (r *Reader) Owned(i int) bool { return i < len(r.refs) && r.refs[i].own != nil }

// fill reads more data into the buffer, moving the command being parsed
// to the front or growing the buffer when it is full. A read error is
// returned once the data read before it has been parsed.
func (r *Reader) fill() error {
	if r.err != nil {
		return r.err
	}
	if r.cs == r.w && r.wait != nil {
		// Nothing pending: wait without a buffer, so that an idle
		// connection holds none.
		if r.buf != nil {
			r.cs, r.w = 0, 0
			if b := r.buf; len(b) == readBufSize {
				bufPool.Put(&b)
			}
			r.buf = nil
		}
		r.wait()
	}
	if r.buf == nil {
		r.buf = *bufPool.Get().(*[]byte)
	}
	if r.w == len(r.buf) {
		if r.cs > 0 {
			r.w = copy(r.buf, r.buf[r.cs:r.w])
			r.cs = 0
		} else {
			nb := make([]byte, 2*len(r.buf))
			copy(nb, r.buf[:r.w])
			r.buf = nb
		}
	}
	for {
		n, err := r.rd.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.err = err
			if n > 0 {
				return nil
			}
			return err
		}
		if n > 0 {
			return nil
		}
	}
}

// ReadCommand returns the next command's arguments, valid until the next
// call. An empty command (an empty array or blank inline line) is skipped.
// Errors are io errors from the connection or *ProtocolError.
func (r *Reader) ReadCommand() ([][]byte, error) {
	for {
		if r.cs == r.w {
			r.cs, r.w = 0, 0
			if len(r.buf) > maxIdleReadBuffer {
				r.buf = nil // do not keep a large command's room per connection
			}
			if err := r.fill(); err != nil {
				return nil, err
			}
		}
		r.refs = r.refs[:0]
		var p int
		var err error
		var inline [][]byte
		if r.buf[r.cs] == '*' {
			p, err = r.readMultiBulk()
		} else {
			inline, p, err = r.readInline()
		}
		if err != nil {
			return nil, err
		}
		start := r.cs
		r.cs += p
		r.inline = inline != nil
		if inline != nil {
			return inline, nil
		}
		if len(r.refs) == 0 {
			continue
		}
		r.args = r.args[:0]
		for _, a := range r.refs {
			if a.own != nil {
				r.args = append(r.args, a.own)
			} else {
				r.args = append(r.args, r.buf[start+a.off:start+a.off+a.n:start+a.off+a.n])
			}
		}
		return r.args, nil
	}
}

// line returns the line at offset p of the command, without its "\r\n"
// (or bare "\n"), and the offset after it, refusing lines longer than max.
// Running out of data inside a command is io.ErrUnexpectedEOF.
func (r *Reader) line(p, max int, what string) ([]byte, int, error) {
	for {
		start := r.cs + p
		if i := bytes.IndexByte(r.buf[start:r.w], '\n'); i >= 0 {
			if i > max+1 {
				return nil, 0, protoErr("too big %s", what)
			}
			l := r.buf[start : start+i]
			if n := len(l); n > 0 && l[n-1] == '\r' {
				l = l[:n-1]
			}
			return l, p + i + 1, nil
		}
		if r.w-start > max+2 {
			return nil, 0, protoErr("too big %s", what)
		}
		if err := r.fill(); err != nil {
			return nil, 0, unexpected(err)
		}
	}
}

// need waits until n bytes from offset p of the command are buffered.
func (r *Reader) need(p, n int) error {
	for r.w-(r.cs+p) < n {
		if err := r.fill(); err != nil {
			return unexpected(err)
		}
	}
	return nil
}

// readMultiBulk parses one RESP array into r.refs and returns its length
// in the buffer.
func (r *Reader) readMultiBulk() (int, error) {
	line, p, err := r.line(0, 64, "multibulk count")
	if err != nil {
		return 0, multiErr(err, "invalid multibulk length")
	}
	n, ok := parseInt(line[1:])
	if !ok || n > int64(r.lim.MaxArgs) {
		return 0, protoErr("invalid multibulk length")
	}
	var total int64
	for range max(n, 0) {
		line, q, err := r.line(p, 64, "bulk length")
		if err != nil {
			return 0, multiErr(err, "invalid bulk length")
		}
		if len(line) == 0 || line[0] != '$' {
			got := byte(' ')
			if len(line) > 0 {
				got = line[0]
			}
			return 0, protoErr("expected '$', got '%c'", got)
		}
		size, ok := parseInt(line[1:])
		if !ok || size < 0 || size > r.lim.MaxBulkLen {
			return 0, protoErr("invalid bulk length")
		}
		total += size
		if total > r.lim.MaxQueryLen {
			return 0, protoErr("too big request")
		}
		p = q
		if size >= bigArg {
			own, taken, err := r.readBig(p, int(size))
			if err != nil {
				return 0, err
			}
			r.refs = append(r.refs, argRef{own: own})
			p += taken
			continue
		}
		if err := r.need(p, int(size)+2); err != nil {
			return 0, err
		}
		at := r.cs + p
		if r.buf[at+int(size)] != '\r' || r.buf[at+int(size)+1] != '\n' {
			return 0, protoErr("bulk string not terminated by CRLF")
		}
		r.refs = append(r.refs, argRef{off: p, n: int(size)})
		p += int(size) + 2
	}
	return p, nil
}

// readBig reads a bulk string of size bytes and its "\r\n" into an
// allocation of its own, taking what is buffered from offset p and reading
// the rest straight from the connection. It returns the string and how
// many buffered bytes it took. Memory grows with the data received, never
// with the declared size alone: the allocation doubles from 64 KB until 1
// MB (or a quarter of the string) has arrived, and is then made exactly the
// string's size, whose pages become resident only as the data fills them.
// A large value is thus held once, at its size, plus at most about 2 MB of
// buffers left for the collector.
func (r *Reader) readBig(p, size int) ([]byte, int, error) {
	want := size + 2
	dst := make([]byte, 0, min(want, allocChunk))
	have := r.buf[r.cs+p : r.w]
	taken := 0
	for len(dst) < want {
		if len(dst) == cap(dst) {
			c := min(want, 2*cap(dst))
			if len(dst) >= min(want/4, exactAfter) {
				c = want
			}
			nd := make([]byte, len(dst), c)
			copy(nd, dst)
			dst = nd
		}
		if taken < len(have) {
			n := copy(dst[len(dst):cap(dst)], have[taken:])
			dst = dst[:len(dst)+n]
			taken += n
			continue
		}
		if r.err != nil {
			return nil, 0, unexpected(r.err)
		}
		n, err := r.rd.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err != nil && len(dst) < want {
			r.err = err
			return nil, 0, unexpected(err)
		}
	}
	if dst[size] != '\r' || dst[size+1] != '\n' {
		return nil, 0, protoErr("bulk string not terminated by CRLF")
	}
	return dst[:size:size], taken, nil
}

// multiErr turns a too-long count line into the protocol error Redis gives.
func multiErr(err error, msg string) error {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return protoErr("%s", msg)
	}
	return err
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readInline parses a telnet-style line: words separated by blanks, with
// Redis's double and single quotes. The words are allocations of their own.
func (r *Reader) readInline() ([][]byte, int, error) {
	line, p, err := r.line(0, r.lim.MaxInline, "inline request")
	if err != nil {
		return nil, 0, err
	}
	args, ok := splitArgs(line)
	if !ok {
		return nil, 0, protoErr("unbalanced quotes in request")
	}
	if len(args) > r.lim.MaxArgs {
		return nil, 0, protoErr("invalid multibulk length")
	}
	if len(args) == 0 {
		args = nil
	}
	return args, p, nil
}

// splitArgs splits an inline command line like Redis's sdssplitargs: blanks
// separate words; "double quotes" take \n \r \t \b \a \\ \" and \xHH escapes;
// 'single quotes' take \' only; a closing quote must be followed by a blank.
func splitArgs(line []byte) ([][]byte, bool) {
	var args [][]byte
	i := 0
	for {
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		if i == len(line) {
			return args, true
		}
		var cur []byte
		inDQ, inSQ := false, false
		for done := false; !done; {
			if inDQ {
				switch {
				case i == len(line):
					return nil, false
				case line[i] == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					cur = append(cur, unhex(line[i+2])<<4|unhex(line[i+3]))
					i += 3
				case line[i] == '\\' && i+1 < len(line):
					i++
					switch line[i] {
					case 'n':
						cur = append(cur, '\n')
					case 'r':
						cur = append(cur, '\r')
					case 't':
						cur = append(cur, '\t')
					case 'b':
						cur = append(cur, '\b')
					case 'a':
						cur = append(cur, '\a')
					default:
						cur = append(cur, line[i])
					}
				case line[i] == '"':
					if i+1 < len(line) && !isBlank(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[i])
				}
			} else if inSQ {
				switch {
				case i == len(line):
					return nil, false
				case line[i] == '\\' && i+1 < len(line) && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case line[i] == '\'':
					if i+1 < len(line) && !isBlank(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[i])
				}
			} else {
				switch {
				case i == len(line) || isBlank(line[i]):
					done = true
				case line[i] == '"':
					inDQ = true
				case line[i] == '\'':
					inSQ = true
				default:
					cur = append(cur, line[i])
				}
			}
			if i < len(line) {
				i++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		args = append(args, cur)
	}
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// parseInt parses a decimal int64 as strictly as Redis's string2ll: an
// optional '-', no '+', no blanks, no leading zeros, no overflow. It takes
// an argument or a stored value without converting either.
func parseInt[T string | []byte](b T) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (1<<63)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
		if u > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(u-1) - 1, true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// Writer encodes RESP2 or RESP3 replies into a memory buffer and sends them to its
// io.Writer only on Flush. Encoding never does I/O, so a command handler
// that holds the keyspace lock never waits for a client that does not read
// its replies: the server flushes after releasing the lock. A bulk reply of
// bigArg bytes or more is not copied: the Writer keeps a reference to the
// (immutable) string and Flush sends it with the buffered bytes in one
// vectored write.
type Writer struct {
	buf  []byte
	mark int         // buf[:mark] is already in segs
	segs net.Buffers // pending segments before buf[mark:]
	size int         // bytes in segs
	w    io.Writer
	// resp3 selects RESP3's types (HELLO 3): a null of its own, maps,
	// sets, doubles, verbatim strings and pushes. RESP2 writes each as
	// Redis does for a RESP2 client.
	resp3 bool
	// errs counts the error replies written, for INFO commandstats.
	errs int
}

// NewWriter returns a Writer that buffers replies for w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// Buffered returns the number of bytes of replies not yet flushed.
func (w *Writer) Buffered() int { return w.size + len(w.buf) - w.mark }

// Flush sends the buffered replies.
func (w *Writer) Flush() error {
	var err error
	if len(w.segs) == 0 {
		if len(w.buf) > 0 {
			_, err = w.w.Write(w.buf)
		}
	} else {
		bufs := append(w.segs, w.buf[w.mark:])
		_, err = bufs.WriteTo(w.w)
		clear(w.segs[:cap(w.segs)])
		w.segs = w.segs[:0]
	}
	w.buf, w.mark, w.size = w.buf[:0], 0, 0
	if cap(w.buf) > maxIdleReplyBuffer {
		w.buf = nil // do not keep a large reply's room per connection
	}
	return err
}

// Simple writes a status reply such as +OK.
func (w *Writer) Simple(s string) {
	w.buf = append(w.buf, '+')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

// Error writes an error reply. Newlines in msg become spaces, as in Redis,
// so that a client's input quoted back cannot break the framing.
func (w *Writer) Error(msg string) {
	w.errs++
	w.buf = append(w.buf, '-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.buf = append(w.buf, c)
	}
	w.buf = append(w.buf, '\r', '\n')
}

// Int writes an integer reply.
func (w *Writer) Int(n int64) {
	w.line(':', n)
}

// Bulk writes a bulk string reply.
func (w *Writer) Bulk(s string) {
	w.line('$', int64(len(s)))
	if len(s) >= bigArg {
		w.segs = append(w.segs, w.buf[w.mark:], unsafe.Slice(unsafe.StringData(s), len(s)))
		w.size += len(w.buf) - w.mark + len(s)
		w.mark = len(w.buf)
	} else {
		w.buf = append(w.buf, s...)
	}
	w.buf = append(w.buf, '\r', '\n')
}

// BulkBytes writes a bulk string reply of b, which it copies.
func (w *Writer) BulkBytes(b []byte) {
	w.line('$', int64(len(b)))
	w.buf = append(w.buf, b...)
	w.buf = append(w.buf, '\r', '\n')
}

// Null writes a null reply: RESP3's _, or RESP2's null bulk string, $-1.
func (w *Writer) Null() {
	if w.resp3 {
		w.buf = append(w.buf, "_\r\n"...)
		return
	}
	w.buf = append(w.buf, "$-1\r\n"...)
}

// NullArray writes a null in place of an array (EXEC of a transaction a
// watched key aborted): RESP3's _, or RESP2's *-1.
func (w *Writer) NullArray() {
	if w.resp3 {
		w.buf = append(w.buf, "_\r\n"...)
		return
	}
	w.buf = append(w.buf, "*-1\r\n"...)
}

// Map writes the header of a map of n pairs, whose keys and values follow
// in turn; in RESP2, a flat array of 2n elements.
func (w *Writer) Map(n int) {
	if w.resp3 {
		w.line('%', int64(n))
		return
	}
	w.line('*', int64(2*n))
}

// Set writes the header of a set of n elements; in RESP2, an array.
func (w *Writer) Set(n int) {
	if w.resp3 {
		w.line('~', int64(n))
		return
	}
	w.line('*', int64(n))
}

// Push writes the header of an out-of-band message of n elements (a
// published message); in RESP2, an array.
func (w *Writer) Push(n int) {
	if w.resp3 {
		w.line('>', int64(n))
		return
	}
	w.line('*', int64(n))
}

// Verbatim writes text as RESP3's verbatim string of format "txt" (INFO,
// CLIENT LIST); in RESP2, a bulk string.
func (w *Writer) Verbatim(text string) {
	if !w.resp3 {
		w.Bulk(text)
		return
	}
	w.line('=', int64(len(text)+4))
	w.buf = append(w.buf, "txt:"...)
	w.buf = append(w.buf, text...)
	w.buf = append(w.buf, '\r', '\n')
}

// Bool writes RESP3's boolean; in RESP2, the integer 1 or 0.
func (w *Writer) Bool(b bool) {
	switch {
	case w.resp3 && b:
		w.buf = append(w.buf, "#t\r\n"...)
	case w.resp3:
		w.buf = append(w.buf, "#f\r\n"...)
	case b:
		w.Int(1)
	default:
		w.Int(0)
	}
}

// Array writes the header of an array of n elements, which follow.
func (w *Writer) Array(n int) {
	w.line('*', int64(n))
}

// Raw writes b, an encoded reply, as it is.
func (w *Writer) Raw(b string) {
	w.buf = append(w.buf, b...)
}

func (w *Writer) line(prefix byte, n int64) {
	w.buf = append(w.buf, prefix)
	w.buf = strconv.AppendInt(w.buf, n, 10)
	w.buf = append(w.buf, '\r', '\n')
}
