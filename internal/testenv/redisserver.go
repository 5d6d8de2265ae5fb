package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServerOptions configure a private redis-server (StartRedis).
type RedisServerOptions struct {
	// AOF turns on the append-only file (appendonly yes, appendfsync
	// everysec unless Args say otherwise), so that a restart reloads the
	// data written up to about a second before the server stopped.
	// Without it the server keeps nothing: a restart comes back empty.
	AOF bool
	// Args are more configuration directives, as on the command line
	// ("--appendfsync", "always").
	Args []string
}

// RedisServer is a redis-server of the test's own, on a free port of
// 127.0.0.1, for tests that restart or kill the server, which they must
// never do to the shared one. It is stopped when the test ends.
type RedisServer struct {
	// Addr is host:port of the server.
	Addr string

	opts RedisServerOptions
	dir  string
	cmd  *exec.Cmd
}

// StartRedis starts a redis-server of the test's own (see RedisServer).
// Like OpenRedis, it skips the test when TTLKIT_TEST_REDIS_URL is not set
// (the test is a Redis test) and fails it under TTLKIT_REQUIRE_BACKENDS=1;
// it also skips or fails when redis-server is not on PATH.
func StartRedis(t testing.TB, o RedisServerOptions) *RedisServer {
	t.Helper()
	lookup(t, EnvRedis)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server is not on PATH: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: finding a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), opts: o, dir: t.TempDir()}
	s.cmd = s.command(bin, port)
	t.Cleanup(func() { s.stop() })
	s.start(t)
	return s
}

func (s *RedisServer) command(bin string, port int) *exec.Cmd {
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no"}
	if s.opts.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	} else {
		args = append(args, "--appendonly", "no")
	}
	return exec.Command(bin, append(args, s.opts.Args...)...)
}

// start runs the server and waits until it answers PING (10 s at most).
func (s *RedisServer) start(t testing.TB) {
	t.Helper()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("testenv: starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			t.Fatalf("testenv: redis-server on %s does not answer: %v\n%s", s.Addr, err, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills the server, if it runs, and waits for it.
func (s *RedisServer) stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Options returns client options for the server (a fresh copy each call).
func (s *RedisServer) Options() *redis.Options { return &redis.Options{Addr: s.Addr} }

// NewClient returns a client of the server, closed when the test ends.
// configure, if not nil, adjusts its options first.
func (s *RedisServer) NewClient(t testing.TB, configure func(*redis.Options)) *redis.Client {
	t.Helper()
	o := s.Options()
	if configure != nil {
		configure(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart kills the server with SIGKILL, as a crash would (no shutdown
// save, an append-only file cut where the last fsync left it), and starts
// it again on the same port and directory. Without AOF it comes back
// empty. It returns once the new server answers.
func (s *RedisServer) Restart(t testing.TB) {
	t.Helper()
	s.stop()
	s.cmd = exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	s.start(t)
}

// String returns the server's address, for messages.
func (s *RedisServer) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }
