package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseAll(t testing.TB, input string, lim Limits) ([][]string, error) {
	r := NewReader(strings.NewReader(input), lim)
	var cmds [][]string
	for {
		args, err := r.ReadCommand()
		if err != nil {
			return cmds, err
		}
		cmd := make([]string, len(args))
		for i, a := range args {
			cmd[i] = string(a)
		}
		cmds = append(cmds, cmd)
	}
}

func TestReadCommand(t *testing.T) {
	cases := []struct {
		name, in string
		want     [][]string
	}{
		{"multibulk", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", [][]string{{"GET", "k"}}},
		{"binary bulk", "*1\r\n$4\r\n\r\n\x00\xff\r\n", [][]string{{"\r\n\x00\xff"}}},
		{"empty bulk", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", [][]string{{"ECHO", ""}}},
		{"pipeline", "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n", [][]string{{"PING"}, {"PING"}}},
		{"empty and null arrays skipped", "*0\r\n*-1\r\n*1\r\n$1\r\nx\r\n", [][]string{{"x"}}},
		{"bare LF line ends", "*1\n$4\nPING\r\n", [][]string{{"PING"}}},
		{"inline", "SET k  v\r\nGET k\n", [][]string{{"SET", "k", "v"}, {"GET", "k"}}},
		{"inline blank lines skipped", "\r\n  \r\nPING\r\n", [][]string{{"PING"}}},
		{"inline quotes", `SET "a b" 'c d' "\x41\t\"" '\'' ""` + "\r\n", [][]string{{"SET", "a b", "c d", "A\t\"", "'", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAll(t, tc.in, Limits{})
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReadCommandErrors(t *testing.T) {
	lim := Limits{MaxBulkLen: 100, MaxArgs: 4, MaxInline: 32, MaxQueryLen: 150}
	cases := []struct{ in, want string }{
		{"*x\r\n", "invalid multibulk length"},
		{"*5\r\n", "invalid multibulk length"}, // above MaxArgs
		{"*99999999999999999999\r\n", "invalid multibulk length"},
		{"*" + strings.Repeat("1", 100) + "\r\n", "invalid multibulk length"},
		{"*1\r\n$x\r\n", "invalid bulk length"},
		{"*1\r\n$-1\r\n", "invalid bulk length"},
		{"*1\r\n$101\r\n", "invalid bulk length"}, // above MaxBulkLen
		{"*1\r\n$+1\r\n", "invalid bulk length"},
		{"*2\r\n$100\r\n" + strings.Repeat("a", 100) + "\r\n$100\r\n", "too big request"},
		{"*1\r\n:1\r\n", "expected '$', got ':'"},
		{"*1\r\n*1\r\n$1\r\nx\r\n", "expected '$', got '*'"},
		{"*1\r\n\r\n", "expected '$', got ' '"},
		{"*1\r\n$1\r\nxyz\r\n", "bulk string not terminated by CRLF"},
		{"SET 'a\r\n", "unbalanced quotes in request"},
		{`SET "a"b` + "\r\n", "unbalanced quotes in request"},
		{strings.Repeat("a", 40) + "\r\n", "too big inline request"},
		{"a b c d e\r\n", "invalid multibulk length"},
	}
	for _, tc := range cases {
		_, err := parseAll(t, tc.in, lim)
		var pe *ProtocolError
		require.ErrorAs(t, err, &pe, "%q", tc.in)
		assert.Equal(t, tc.want, pe.Msg, "%q", tc.in)
	}
	for _, in := range []string{"*1\r\n$3\r\nab", "*2\r\n$1\r\na\r\n", "*1", "PING"} {
		_, err := parseAll(t, in, lim)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "%q", in)
	}
}

func TestParseInt(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1": 1, "-1": -1, "1234567890": 1234567890,
		"9223372036854775807": math.MaxInt64, "-9223372036854775808": math.MinInt64,
	}
	for s, want := range good {
		got, ok := parseInt([]byte(s))
		require.True(t, ok, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "-", "+1", "01", "-0", "00", " 1", "1 ", "1.0", "1e3", "0x10",
		"9223372036854775808", "-9223372036854775809", "99999999999999999999", "18446744073709551616"} {
		_, ok := parseInt([]byte(s))
		require.False(t, ok, "%q", s)
	}
}

// TestHostileLengthsAllocateLittle declares huge lengths and then sends
// almost nothing: the parser must not allocate from the declaration.
func TestHostileLengthsAllocateLittle(t *testing.T) {
	for _, in := range []string{
		"*1\r\n$536870912\r\nabc",
		"*1048576\r\n$1\r\na\r\n",
		"*2\r\n$3\r\nSET\r\n$500000000\r\n" + strings.Repeat("x", 100000),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := parseAll(t, in, Limits{})
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		allocated := after.TotalAlloc - before.TotalAlloc
		assert.Less(t, allocated, uint64(2<<20), "%.30q allocated %d bytes", in, allocated)
	}
}

// encode writes args as a RESP array of bulk strings, as clients send them.
func encode(buf *bytes.Buffer, args [][]byte) {
	fmt.Fprintf(buf, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(buf, "$%d\r\n%s\r\n", len(a), a)
	}
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Simple("OK")
	w.Error("ERR bad\r\nthing")
	w.Int(-42)
	w.Bulk("a\r\nb")
	w.Null()
	w.Array(2)
	w.Bulk("")
	w.Int(math.MaxInt64)
	require.NoError(t, w.Flush())
	require.Equal(t, "+OK\r\n-ERR bad  thing\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n$0\r\n\r\n:9223372036854775807\r\n", buf.String())
}

// FuzzParse feeds arbitrary bytes to the parser. It must never panic or
// exceed its limits; every error is the connection's or a ProtocolError;
// and what it parsed, sent again as RESP, parses to the same commands.
// The seed corpus in testdata/fuzz/FuzzParse runs with every go test.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n",
		"SET k \"v\\x00\" 'x'\r\n",
		"*1\r\n$536870912\r\n",
		"*-1\r\n*0\r\n",
	} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxBulkLen: 1 << 10, MaxArgs: 64, MaxInline: 1 << 10, MaxQueryLen: 4 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), lim)
		var cmds [][][]byte
		for {
			args, err := r.ReadCommand()
			if err != nil {
				var pe *ProtocolError
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &pe) {
					t.Fatalf("unexpected error %T %v", err, err)
				}
				break
			}
			if len(args) == 0 || len(args) > lim.MaxArgs {
				t.Fatalf("%d args", len(args))
			}
			var total int
			for _, a := range args {
				if int64(len(a)) > lim.MaxBulkLen {
					t.Fatalf("arg of %d bytes", len(a))
				}
				total += len(a)
			}
			if int64(total) > lim.MaxQueryLen {
				t.Fatalf("command of %d bytes", total)
			}
			// Arguments are valid until the next ReadCommand.
			cmd := make([][]byte, len(args))
			for i, a := range args {
				cmd[i] = bytes.Clone(a)
			}
			cmds = append(cmds, cmd)
			if len(cmds) > len(data) {
				t.Fatalf("%d commands from %d bytes", len(cmds), len(data))
			}
		}
		var buf bytes.Buffer
		for _, c := range cmds {
			encode(&buf, c)
		}
		r2 := NewReader(bufio.NewReader(&buf), lim)
		for i, want := range cmds {
			got, err := r2.ReadCommand()
			if err != nil {
				t.Fatalf("re-parsing command %d: %v", i, err)
			}
			if len(got) != len(want) {
				t.Fatalf("command %d: %q != %q", i, got, want)
			}
			for j := range got {
				if !bytes.Equal(got[j], want[j]) {
					t.Fatalf("command %d: %q != %q", i, got, want)
				}
			}
		}
		if _, err := r2.ReadCommand(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the re-parsed commands: %v", err)
		}
	})
}

// TestLargeValueAllocatesItsSize: a 20 MB bulk string costs its size plus
// a small constant (no doubled buffer, no copy), and is handed over as an
// allocation of its own that the server keeps as the value.
func TestLargeValueAllocatesItsSize(t *testing.T) {
	const size = 20 << 20
	in := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + fmt.Sprint(size) + "\r\n" + strings.Repeat("v", size) + "\r\n"
	r := NewReader(strings.NewReader(in), Limits{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	args, err := r.ReadCommand()
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, args[2], size)
	assert.True(t, r.Owned(2))
	assert.False(t, r.Owned(1))
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(size+3<<20), "allocated %d bytes for %d", allocated, size)
}
