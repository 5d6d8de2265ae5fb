package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
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
type Reader struct {
	br  *bufio.Reader
	lim Limits
}

// NewReader returns a Reader that parses commands from r within lim.
func NewReader(r io.Reader, lim Limits) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 16<<10), lim: lim.withDefaults()}
}

// Buffered reports how many bytes are already read from the connection and
// not yet parsed; the server flushes its replies when there are none, so a
// pipeline of commands gets its replies in one write.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// ReadCommand returns the next command's arguments. An empty command (an
// empty array or blank inline line) is skipped. Errors are io errors from the
// connection or *ProtocolError.
func (r *Reader) ReadCommand() ([][]byte, error) {
	for {
		b, err := r.br.Peek(1)
		if err != nil {
			return nil, err
		}
		var args [][]byte
		if b[0] == '*' {
			args, err = r.readMultiBulk()
		} else {
			args, err = r.readInline()
		}
		if err != nil {
			return nil, err
		}
		if len(args) > 0 {
			return args, nil
		}
	}
}

// readLine returns a line without its "\r\n" (or bare "\n"), refusing lines
// longer than max.
func (r *Reader) readLine(max int, what string) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		if err == nil || errors.Is(err, bufio.ErrBufferFull) {
			if len(line)+len(frag) > max+2 {
				return nil, protoErr("too big %s", what)
			}
			line = append(line, frag...)
			if err == nil {
				break
			}
			continue
		}
		if errors.Is(err, io.EOF) && len(line)+len(frag) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func (r *Reader) readMultiBulk() ([][]byte, error) {
	line, err := r.readLine(64, "multibulk count")
	if err != nil {
		return nil, multiErr(err, "invalid multibulk length")
	}
	n, ok := parseInt(line[1:])
	if !ok || n > int64(r.lim.MaxArgs) {
		return nil, protoErr("invalid multibulk length")
	}
	if n <= 0 {
		return nil, nil
	}
	args := make([][]byte, 0, min(n, 1024))
	var total int64
	for range n {
		line, err := r.readLine(64, "bulk length")
		if err != nil {
			return nil, unexpected(multiErr(err, "invalid bulk length"))
		}
		if len(line) == 0 || line[0] != '$' {
			got := byte(' ')
			if len(line) > 0 {
				got = line[0]
			}
			return nil, protoErr("expected '$', got '%c'", got)
		}
		size, ok := parseInt(line[1:])
		if !ok || size < 0 || size > r.lim.MaxBulkLen {
			return nil, protoErr("invalid bulk length")
		}
		total += size
		if total > r.lim.MaxQueryLen {
			return nil, protoErr("too big request")
		}
		arg, err := r.readBulk(size)
		if err != nil {
			return nil, err
		}
		args = append(args, arg)
	}
	return args, nil
}

// multiErr turns a too-long count line into the protocol error Redis gives.
func multiErr(err error, msg string) error {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return protoErr("%s", msg)
	}
	return err
}

// readBulk reads size bytes and the trailing "\r\n". Memory grows with the
// data received, never with the declared size alone.
func (r *Reader) readBulk(size int64) ([]byte, error) {
	var buf []byte
	if size+2 <= allocChunk {
		buf = make([]byte, size+2)
		if _, err := io.ReadFull(r.br, buf); err != nil {
			return nil, unexpected(err)
		}
	} else {
		var bb bytes.Buffer
		bb.Grow(allocChunk)
		if _, err := io.CopyN(&bb, r.br, size+2); err != nil {
			return nil, unexpected(err)
		}
		buf = bb.Bytes()
	}
	if buf[size] != '\r' || buf[size+1] != '\n' {
		return nil, protoErr("bulk string not terminated by CRLF")
	}
	return buf[:size:size], nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readInline parses a telnet-style line: words separated by blanks, with
// Redis's double and single quotes.
func (r *Reader) readInline() ([][]byte, error) {
	line, err := r.readLine(r.lim.MaxInline, "inline request")
	if err != nil {
		return nil, err
	}
	args, ok := splitArgs(line)
	if !ok {
		return nil, protoErr("unbalanced quotes in request")
	}
	if len(args) > r.lim.MaxArgs {
		return nil, protoErr("invalid multibulk length")
	}
	return args, nil
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
// optional '-', no '+', no blanks, no leading zeros, no overflow.
func parseInt(b []byte) (int64, bool) {
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
	for _, c := range b {
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

// Writer encodes RESP2 replies into a memory buffer and sends them to its
// io.Writer only on Flush. Encoding never does I/O, so a command handler
// that holds the keyspace lock never waits for a client that does not read
// its replies: the server flushes after releasing the lock.
type Writer struct {
	bw  bytes.Buffer
	w   io.Writer
	num [24]byte
}

// NewWriter returns a Writer that buffers replies for w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// Buffered returns the number of bytes of replies not yet flushed.
func (w *Writer) Buffered() int { return w.bw.Len() }

// Flush sends the buffered replies.
func (w *Writer) Flush() error {
	_, err := w.bw.WriteTo(w.w)
	if w.bw.Cap() > maxIdleReplyBuffer {
		w.bw = bytes.Buffer{} // do not keep a large reply's room per connection
	}
	return err
}

// Simple writes a status reply such as +OK.
func (w *Writer) Simple(s string) {
	w.bw.WriteByte('+')
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// Error writes an error reply. Newlines in msg become spaces, as in Redis,
// so that a client's input quoted back cannot break the framing.
func (w *Writer) Error(msg string) {
	w.bw.WriteByte('-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.bw.WriteByte(c)
	}
	w.bw.WriteString("\r\n")
}

// Int writes an integer reply.
func (w *Writer) Int(n int64) {
	w.line(':', n)
}

// Bulk writes a bulk string reply.
func (w *Writer) Bulk(s string) {
	w.line('$', int64(len(s)))
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// Null writes the RESP2 null bulk string, $-1.
func (w *Writer) Null() {
	w.bw.WriteString("$-1\r\n")
}

// Array writes the header of an array of n elements, which follow.
func (w *Writer) Array(n int) {
	w.line('*', int64(n))
}

func (w *Writer) line(prefix byte, n int64) {
	b := append(w.num[:0], prefix)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, '\r', '\n')
	w.bw.Write(b)
}
