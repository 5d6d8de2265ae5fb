package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// RedisServerOptions configures a private redis-server.
type RedisServerOptions struct {
	// AppendOnly turns on the append-only file (appendfsync always), so a
	// restart keeps every acknowledged write; without it a restart comes
	// back empty, as a server without persistence does.
	AppendOnly bool
	// Args are more redis-server arguments ("--maxmemory", "10mb").
	Args []string
}

// RedisServer is a redis-server of a test's own, on a free loopback port,
// for tests that stop, kill or restart a server: the shared one named by
// TTLKIT_TEST_REDIS_URL is never touched. It is stopped when the test ends.
type RedisServer struct {
	// Addr is host:port; it stays the same across restarts.
	Addr string

	t    testing.TB
	dir  string
	opts RedisServerOptions

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedis starts a private redis-server. It uses the same policy as the
// shared backends: it runs only when TTLKIT_TEST_REDIS_URL is set (the test
// needs Redis), and a missing redis-server binary skips the test, or fails
// it when backends are required.
func StartRedis(t testing.TB, opts RedisServerOptions) *RedisServer {
	t.Helper()
	testenv.Lookup(t, testenv.EnvRedis)
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Unavailable(t, "redis-server is not on PATH: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return startServer(t, addr, opts)
}

// startServer starts a redis-server on addr and registers its stop.
func startServer(t testing.TB, addr string, opts RedisServerOptions) *RedisServer {
	t.Helper()
	s := &RedisServer{Addr: addr, t: t, dir: t.TempDir(), opts: opts}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// Client returns a client of the server, closed when the test ends. Its
// short timeouts and single retry make an outage visible to the test.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:         s.Addr,
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Options returns client options for the server (a fresh copy each call).
func (s *RedisServer) Options() *redis.Options { return &redis.Options{Addr: s.Addr} }

// NewClient returns a client of the server, closed when the test ends;
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

// String returns the server's address, for messages.
func (s *RedisServer) String() string { return "redis-server " + s.Addr }

// URL returns redis://Addr/0.
func (s *RedisServer) URL() string { return "redis://" + s.Addr + "/0" }

func (s *RedisServer) start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	args := []string{
		"--bind", "127.0.0.1", "--port", port, "--dir", s.dir,
		"--save", "", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log"),
	}
	if s.opts.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, s.opts.Args...)
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("testenv: start redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("testenv: redis-server on %s did not answer: %v\n%s", s.Addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill ends the server with SIGKILL and waits for it: nothing is saved
// beyond what the append-only file already holds.
func (s *RedisServer) Kill() {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Pause stops the server process (SIGSTOP) until Resume: it neither
// answers nor reads, as a server stuck on a slow disk or a long fork.
func (s *RedisServer) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *RedisServer) Resume() { s.signal(syscall.SIGCONT) }

func (s *RedisServer) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatalf("testenv: redis-server on %s does not run", s.Addr)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("testenv: signal %v to redis-server on %s: %v", sig, s.Addr, err)
	}
}

// Start starts the server again on the same address after Kill: empty
// without AppendOnly, with every acknowledged write with it.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		s.t.Fatalf("testenv: redis-server on %s is already running", s.Addr)
	}
	s.start()
}

// Restart kills the server and starts it again after down.
func (s *RedisServer) Restart(down time.Duration) {
	s.t.Helper()
	s.Kill()
	time.Sleep(down)
	s.Start()
}

// RunID returns the server's run_id, which changes at every start.
func (s *RedisServer) RunID(ctx context.Context) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	info, err := c.InfoMap(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	id := info["Server"]["run_id"]
	if id == "" {
		return "", fmt.Errorf("testenv: INFO server on %s has no run_id", s.Addr)
	}
	return id, nil
}

func (s *RedisServer) stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Process.Signal(syscall.SIGCONT) // if paused
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
