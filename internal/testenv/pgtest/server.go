package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// Server is a PostgreSQL server of a test's own (initdb in a temporary
// directory, trust authentication, fsync on), on a free loopback port, for
// tests that stop or restart the server: the shared one named by
// TTLKIT_TEST_POSTGRES_URL is never touched. Its data survive a restart, as
// a real server's committed transactions do. It is stopped when the test
// ends.
type Server struct {
	// Port is the port it listens on, the same across restarts.
	Port int

	t       testing.TB
	bin     string
	dataDir string
	asUser  string // run the server as this user (initdb refuses root)

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartPostgres starts a private PostgreSQL server. It runs only when
// TTLKIT_TEST_POSTGRES_URL is set (the test needs PostgreSQL); missing
// server binaries skip the test, or fail it when backends are required.
func StartPostgres(t testing.TB) *Server {
	t.Helper()
	testenv.Lookup(t, testenv.EnvPostgres)
	bin := serverBin()
	if bin == "" {
		testenv.Unavailable(t, "no PostgreSQL server binaries (initdb, postgres) on PATH or under /usr/lib/postgresql")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &Server{Port: port, t: t, bin: bin}
	dir, err := os.MkdirTemp("", "ttlkit-pg-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s.dataDir = filepath.Join(dir, "data")
	if os.Geteuid() == 0 {
		s.asUser = "postgres"
		u, err := user.Lookup(s.asUser)
		if err != nil {
			testenv.Unavailable(t, "running as root and no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	if out, err := s.command("initdb", "-D", s.dataDir, "-A", "trust", "-U", "postgres", "--no-instructions").CombinedOutput(); err != nil {
		t.Fatalf("testenv: initdb: %v\n%s", err, out)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// serverBin returns the directory of initdb and postgres: PATH's, else the
// newest under /usr/lib/postgresql.
func serverBin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// command returns the server program name run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// URL returns the connection URL of database postgres on the server.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// Pool returns a pool on the server, closed when the test ends.
func (s *Server) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.ConnectTimeout)
	defer cancel()
	p, err := pgxpool.New(ctx, s.URL())
	if err != nil {
		t.Fatalf("testenv: postgres pool: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func (s *Server) start() {
	s.t.Helper()
	cmd := s.command("postgres", "-D", s.dataDir, "-p", strconv.Itoa(s.Port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", "-c", "fsync=on", "-c", "max_connections=200")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("testenv: postgres: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), time.Second)
		if err == nil {
			_ = c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			p, perr := pgxpool.New(ctx, s.URL())
			if perr == nil {
				perr = p.Ping(ctx)
				p.Close()
			}
			cancel()
			if perr == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("testenv: postgres on port %d did not start within 30 s", s.Port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops the server at once (SIGQUIT: immediate shutdown, as a crash;
// committed transactions are recovered from the log at the next start).
func (s *Server) stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Restart stops the server as a crash would, waits downFor, and starts it
// again on the same port and data.
func (s *Server) Restart(downFor time.Duration) {
	s.t.Helper()
	s.stop()
	time.Sleep(downFor)
	s.start()
}
