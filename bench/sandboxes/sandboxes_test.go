package sandboxes_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/redisentities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/examples/sandboxes/archive"
	"github.com/ttlkit/ttlkit/examples/sandboxes/backend"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/redislease"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/redispool"
)

// This test binary is also the process sandboxes' agent.
func TestMain(m *testing.M) {
	agent.ServeIfAgent()
	os.Exit(m.Run())
}

var ready = probe.Options{Timeout: time.Minute, AttemptTimeout: 5 * time.Second}

// token is the agents' token: every call to an agent carries it, as in the
// example.
const token = "bench-agent-token"

var agentEnv = []string{agent.EnvToken + "=" + token}

// kinds returns the sandbox provisioners to measure: processes always,
// Docker when TTLKIT_TEST_DOCKER names an engine (the image and network
// are built and removed here).
func kinds(b *testing.B) map[string]sandbox.Provisioner {
	label := fmt.Sprintf("bench-sandboxes-%d", os.Getpid())
	proc, err := sandbox.NewProcess(sandbox.ProcessOptions{
		Agent: []string{os.Args[0], "agent"}, Env: agentEnv, Label: label, Root: b.TempDir(), StopGrace: 5 * time.Second, Ready: ready,
	})
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]sandbox.Provisioner{"process": proc}
	if os.Getenv(dockertest.EnvDocker) == "" {
		return out
	}
	cli := dockertest.Client(b)
	ctx := context.Background()
	image := "ttlkit-test/workspace-base:" + label
	if _, err := sandbox.EnsureImage(ctx, cli, image, sandbox.DefaultBusybox, map[string]string{dockertest.LabelTest: "1"}, nil); err != nil {
		b.Fatal(err)
	}
	if err := sandbox.EnsureNetwork(ctx, cli, label, label); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := sandbox.RemoveDocker(ctx, cli, label, image); err != nil {
			b.Error(err)
		}
	})
	d, err := sandbox.NewDocker(cli, sandbox.DockerOptions{
		Image: image, Label: label, Network: label, Env: agentEnv, Memory: 512 << 20, CPUs: 1, Pids: 256,
		WorkSize: "256m", TmpSize: "64m", StopTimeout: 5 * time.Second, Ready: ready,
	})
	if err != nil {
		b.Fatal(err)
	}
	out["docker"] = d
	return out
}

// system is a running backend behind its HTTP API.
type system struct {
	b   *backend.Backend
	srv *httptest.Server
}

// start runs a backend on prov with the given warm minimum, its state in
// memory or (state "redis") in the test Redis.
func start(b *testing.B, prov sandbox.Provisioner, warm int, state string) *system {
	cfg := backend.Config{Provisioner: prov, AgentToken: token, MinWarm: warm, MaxWarm: 10, Metrics: backend.NewMetrics()}
	var err error
	if cfg.Archive, err = archive.NewDir(b.TempDir()); err != nil {
		b.Fatal(err)
	}
	if state == "redis" {
		r := redistest.OpenRedis(b)
		cfg.Shared = true
		cfg.Assignments = backend.NewRedisAssignments(r.Client, r.Prefix+"ws")
		if cfg.Entities, err = redisentities.New(r.Client, redisentities.Options{Prefix: r.Prefix + "ws"}); err != nil {
			b.Fatal(err)
		}
		if cfg.Inventory, err = redispool.New(r.Client, redispool.Options{Prefix: r.Prefix + "warm"}); err != nil {
			b.Fatal(err)
		}
		claims, err := redislease.New(r.Client, redislease.Options{Prefix: r.Prefix + "claims"})
		if err != nil {
			b.Fatal(err)
		}
		if cfg.Claims, err = lease.New(1<<20, lease.Options{Store: claims}); err != nil {
			b.Fatal(err)
		}
	} else {
		cfg.Assignments = backend.NewMemoryAssignments(nil)
		cfg.Entities = entities.NewMemoryStore(entities.MemoryStoreOptions{})
	}
	be, err := backend.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := cfg.Metrics.Register(reg, be); err != nil {
		b.Fatal(err)
	}
	s := &system{b: be, srv: httptest.NewServer(backend.NewServer(be, reg))}
	b.Cleanup(func() {
		s.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = be.Down(ctx)
		_ = be.Close(ctx)
		if cfg.Claims != nil {
			_ = cfg.Claims.Close(ctx)
		}
	})
	return s
}

var trueCmd = []byte(`{"command": ["true"]}`)

func (s *system) exec(b *testing.B, conv string) {
	resp, err := http.Post(s.srv.URL+"/conversations/"+conv+"/exec", "application/json", bytes.NewReader(trueCmd))
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"exit_code":0`)) {
		b.Fatalf("exec: %d %s", resp.StatusCode, body)
	}
}

func (s *system) delete(b *testing.B, conv string) {
	req, _ := http.NewRequest("DELETE", s.srv.URL+"/conversations/"+conv, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b.Fatalf("delete: %d", resp.StatusCode)
	}
}

// waitWarm waits until the pool has n idle sandboxes.
func (s *system) waitWarm(b *testing.B, n int) {
	deadline := time.Now().Add(time.Minute)
	for s.b.Pool().Stats().Idle < n {
		if time.Now().After(deadline) {
			b.Fatalf("the warm pool did not refill: %+v", s.b.Pool().Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkSandboxFirstExec is the time from a new conversation's first
// exec (`true`) to its result, through the HTTP API: with a warm pool
// (impl=warm, a sandbox is assigned at once) and without one (impl=cold,
// the sandbox is created for the request). Between iterations, outside the
// timer, the conversation is deleted and the warm pool refilled.
func BenchmarkSandboxFirstExec(b *testing.B) {
	for kind, prov := range kinds(b) {
		for _, impl := range []string{"warm", "cold"} {
			b.Run("sandbox="+kind+"/impl="+impl, func(b *testing.B) {
				warm := 0
				if impl == "warm" {
					warm = 1
				}
				s := start(b, prov, warm, "memory")
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					s.waitWarm(b, warm)
					conv := fmt.Sprintf("first-%d", i)
					b.StartTimer()
					s.exec(b, conv)
					b.StopTimer()
					s.delete(b, conv)
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkSandboxExec is one exec of `true` in an assigned sandbox:
// through the backend's HTTP API (impl=backend, with its state in memory
// or Redis), sent to the sandbox's agent directly (impl=agent), and run
// without any sandbox machinery: os/exec in this process for process
// sandboxes (impl=os-exec), the Engine API's exec for containers
// (impl=docker-exec).
func BenchmarkSandboxExec(b *testing.B) {
	for kind, prov := range kinds(b) {
		for _, state := range []string{"memory", "redis"} {
			if state == "redis" && os.Getenv(testenv.EnvRedis) == "" {
				continue
			}
			s := start(b, prov, 0, state)
			s.exec(b, "hot")
			st, err := s.b.State(context.Background(), "hot")
			if err != nil {
				b.Fatal(err)
			}
			b.Run("sandbox="+kind+"/state="+state+"/impl=backend", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					s.exec(b, "hot")
				}
			})
			if state != "memory" {
				continue
			}
			ag := agent.NewClient(fmt.Sprintf("%s:%d", st.Host, st.Port), &http.Client{Transport: agent.Transport()}, token)
			b.Run("sandbox="+kind+"/state="+state+"/impl=agent", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					res, err := ag.Exec(context.Background(), agent.ExecRequest{Command: []string{"true"}})
					if err != nil || res.ExitCode != 0 {
						b.Fatal(res, err)
					}
				}
			})
			if kind == "process" {
				b.Run("sandbox="+kind+"/state="+state+"/impl=os-exec", func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						if err := exec.Command("true").Run(); err != nil {
							b.Fatal(err)
						}
					}
				})
				continue
			}
			cli := dockertest.Client(b)
			b.Run("sandbox="+kind+"/state="+state+"/impl=docker-exec", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					dockerExec(b, cli, st.ContainerID)
				}
			})
		}
	}
}

// dockerExec runs `true` in the container as `docker exec` does: create,
// start attached, read to the end, inspect the exit code.
func dockerExec(b *testing.B, cli *client.Client, id string) {
	ctx := context.Background()
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		b.Fatal(err)
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, att.Reader)
	att.Close()
	ins, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil || ins.ExitCode != 0 {
		b.Fatal(ins, err)
	}
}
