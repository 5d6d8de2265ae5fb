package workspace

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Prompt ends every command's output.
const Prompt = "$ "

// maxLine bounds a terminal's input line.
const maxLine = 4096

// CountInterval is how often "count" prints a line.
const CountInterval = 100 * time.Millisecond

// terminal serves GET /terminal: a WebSocket whose client sends what is
// typed (each message one or more keys) and receives what a terminal would
// show: the keys echoed, and each command's output when Enter is pressed.
// Commands: help, ls, cat NAME, echo TEXT, date, count N (a line every
// CountInterval, stopped by Ctrl-C), clear.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil) // same origin only; the proxy checked too
	if err != nil {
		return // Accept answered
	}
	s.wg.Add(1)
	defer s.wg.Done()
	defer c.CloseNow()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	t := &term{s: s, c: c, ctx: ctx}
	defer t.stop()
	if !t.send("workspace " + s.opts.ID + " — type help\r\n" + Prompt) {
		return
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				_ = c.Close(websocket.StatusGoingAway, "workspace stopping")
			}
			return
		}
		if !t.input(string(b)) {
			return
		}
	}
}

// term is one terminal session.
type term struct {
	s    *Server
	c    *websocket.Conn
	ctx  context.Context
	line []rune

	mu      sync.Mutex
	running context.CancelFunc // the command streaming output, if any
	done    chan struct{}
}

func (t *term) send(s string) bool {
	ctx, cancel := context.WithTimeout(t.ctx, 10*time.Second)
	defer cancel()
	return t.c.Write(ctx, websocket.MessageText, []byte(s)) == nil
}

// input handles typed keys; false ends the session.
func (t *term) input(keys string) bool {
	var echo strings.Builder
	for _, k := range keys {
		switch {
		case k == 3: // Ctrl-C
			if t.stop() {
				continue
			}
			t.line = t.line[:0]
			echo.WriteString("^C\r\n" + Prompt)
		case k == '\r' || k == '\n':
			echo.WriteString("\r\n")
			if !t.send(echo.String()) {
				return false
			}
			echo.Reset()
			cmd := string(t.line)
			t.line = t.line[:0]
			if !t.run(strings.TrimSpace(cmd)) {
				return false
			}
		case k == 127 || k == 8: // backspace
			if len(t.line) > 0 {
				t.line = t.line[:len(t.line)-1]
				echo.WriteString("\b \b")
			}
		case k < ' ':
		default:
			if len(t.line) < maxLine {
				t.line = append(t.line, k)
				echo.WriteRune(k)
			}
		}
	}
	return echo.Len() == 0 || t.send(echo.String())
}

// run runs one command line.
func (t *term) run(cmd string) bool {
	name, arg, _ := strings.Cut(cmd, " ")
	arg = strings.TrimSpace(arg)
	var out string
	switch name {
	case "":
	case "help":
		out = "commands: help, ls, cat NAME, echo TEXT, date, count N, clear\r\n"
	case "ls":
		fs, err := t.s.files()
		if err != nil {
			out = "ls: " + err.Error() + "\r\n"
			break
		}
		for _, f := range fs {
			out += fmt.Sprintf("%8d  %s\r\n", f.Size, f.Name)
		}
	case "cat":
		if !ValidName(arg) {
			out = "cat: give a file name\r\n"
			break
		}
		b, err := t.s.root.ReadFile(arg)
		if err != nil {
			out = "cat: " + arg + ": no such file\r\n"
			break
		}
		out = strings.ReplaceAll(string(b), "\n", "\r\n")
		if !strings.HasSuffix(out, "\n") {
			out += "\r\n"
		}
	case "echo":
		out = arg + "\r\n"
	case "date":
		out = time.Now().UTC().Format(time.RFC1123) + "\r\n"
	case "clear":
		out = "\x1b[2J"
	case "count":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > 1000 {
			out = "count: give a number from 1 to 1000\r\n"
			break
		}
		t.count(n)
		return true
	default:
		out = name + ": command not found (try help)\r\n"
	}
	return t.send(out + Prompt)
}

// count prints 1..n, one line every CountInterval, in the background, so
// that Ctrl-C can stop it: output the user did not type, which the proxy
// counts as activity all the same.
func (t *term) count(n int) {
	ctx, cancel := context.WithCancel(t.ctx)
	done := make(chan struct{})
	t.mu.Lock()
	t.running, t.done = cancel, done
	t.mu.Unlock()
	go func() {
		defer close(done)
		tk := time.NewTicker(CountInterval)
		defer tk.Stop()
		for i := 1; i <= n; i++ {
			select {
			case <-ctx.Done():
				t.send("^C\r\n" + Prompt)
				return
			case <-tk.C:
			}
			if !t.send(strconv.Itoa(i) + "\r\n") {
				return
			}
		}
		t.mu.Lock()
		t.running = nil
		t.mu.Unlock()
		t.send(Prompt)
	}()
}

// stop ends the running command, if any, and reports whether there was one.
func (t *term) stop() bool {
	t.mu.Lock()
	cancel, done := t.running, t.done
	t.running = nil
	t.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	<-done
	return true
}
