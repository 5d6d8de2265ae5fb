package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// ClusterServerOptions configures a private Redis Cluster.
type ClusterServerOptions struct {
	// Masters is the number of masters; 0 means 3 (the fewest Redis
	// Cluster accepts).
	Masters int
	// Replicas is the number of replicas of each master; 0 means 1 and a
	// negative number none.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a master may not
	// answer before its replica takes over. 0 means one second.
	NodeTimeout time.Duration
	// AppendOnly gives every node an append-only file (appendfsync
	// always), as RedisServerOptions.AppendOnly.
	AppendOnly bool
}

// ClusterServer is a Redis Cluster of a test's own: redis-server processes
// on free loopback ports (no persistence unless AppendOnly),
// for tests that migrate slots, fail over or kill nodes; the shared cluster
// named by TTLKIT_TEST_REDIS_CLUSTER is never touched. Every node is
// stopped when the test ends.
type ClusterServer struct {
	// Nodes are the cluster's servers, masters first (as created; a
	// failover changes the roles, see Master and ReplicaOf).
	Nodes []*RedisServer

	t testing.TB
}

// StartRedisCluster starts a private Redis Cluster and waits until every
// slot is served and every replica is in sync. It runs only when
// TTLKIT_TEST_REDIS_CLUSTER is set (the test needs a cluster); a missing
// redis-server or redis-cli skips the test, or fails it when backends are
// required.
func StartRedisCluster(t testing.TB, opts ClusterServerOptions) *ClusterServer {
	t.Helper()
	testenv.Lookup(t, testenv.EnvRedisCluster)
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, "%s is not on PATH: %v", bin, err)
		}
	}
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	switch {
	case opts.Replicas == 0:
		opts.Replicas = 1
	case opts.Replicas < 0:
		opts.Replicas = 0
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = time.Second
	}
	c := &ClusterServer{t: t}
	n := opts.Masters * (1 + opts.Replicas)
	addrs := make([]string, n)
	for i := range n {
		addrs[i] = clusterAddr(t)
		c.Nodes = append(c.Nodes, startServer(t, addrs[i], RedisServerOptions{AppendOnly: opts.AppendOnly, Args: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
			// A replica's first sync starts at once (not after 5 s, in
			// case more replicas come).
			"--repl-diskless-sync-delay", "0",
		}}))
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(opts.Replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitStable(ctx); err != nil {
		t.Fatalf("testenv: cluster %s: %v", strings.Join(addrs, ","), err)
	}
	return c
}

// clusterAddr returns a free loopback address whose port plus 10000 (the
// cluster bus) is free too.
func clusterAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testenv: free port: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 {
			_ = ln.Close()
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		_ = ln.Close()
		if err != nil {
			continue
		}
		_ = bus.Close()
		return ln.Addr().String()
	}
	t.Fatalf("testenv: no free port pair for a cluster node")
	return ""
}

// Addrs returns the addresses of every node.
func (c *ClusterServer) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Client returns a cluster client of every node, closed when the test
// ends; configure, if not nil, adjusts its options (ClusterOptions) first.
func (c *ClusterServer) Client(t testing.TB, configure func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	o := ClusterOptions(c.Addrs())
	if configure != nil {
		configure(o)
	}
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Node returns the server at addr.
func (c *ClusterServer) Node(addr string) *RedisServer {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	c.t.Fatalf("testenv: no cluster node at %s", addr)
	return nil
}

// admin runs f with a client of the node at addr that never retries.
func admin[T any](addr string, f func(*redis.Client) (T, error)) (T, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer cl.Close()
	return f(cl)
}

// Do runs one command on the node at addr (CLUSTER FAILOVER, CONFIG SET,
// ...) and returns its reply.
func (c *ClusterServer) Do(ctx context.Context, addr string, args ...any) (any, error) {
	return admin(addr, func(cl *redis.Client) (any, error) { return cl.Do(ctx, args...).Result() })
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	myself, isMaster bool
	failed           bool
	slots            []string
}

// nodes returns CLUSTER NODES as the node at addr sees the cluster.
func nodes(ctx context.Context, addr string) ([]clusterNode, error) {
	out, err := admin(addr, func(cl *redis.Client) (string, error) { return cl.ClusterNodes(ctx).Result() })
	if err != nil {
		return nil, err
	}
	var ns []clusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		ns = append(ns, clusterNode{
			id: f[0], addr: addr, master: f[3],
			myself:   slices.Contains(flags, "myself"),
			isMaster: slices.Contains(flags, "master"),
			failed:   slices.Contains(flags, "fail") || slices.Contains(flags, "fail?"),
			slots:    f[8:],
		})
	}
	return ns, nil
}

// live returns the addresses of the nodes that run.
func (c *ClusterServer) live() []string {
	var addrs []string
	for _, n := range c.Nodes {
		if n.running() {
			addrs = append(addrs, n.Addr)
		}
	}
	return addrs
}

// view returns CLUSTER NODES from the first running node that answers.
func (c *ClusterServer) view(ctx context.Context) ([]clusterNode, error) {
	var err error
	for _, a := range c.live() {
		var ns []clusterNode
		if ns, err = nodes(ctx, a); err == nil {
			return ns, nil
		}
	}
	if err == nil {
		err = errors.New("no node runs")
	}
	return nil, err
}

// Master returns the address of the master that serves slot, as a running
// node sees it.
func (c *ClusterServer) Master(ctx context.Context, slot int) (string, error) {
	ns, err := c.view(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range ns {
		if n.isMaster && servesSlot(n.slots, slot) {
			return n.addr, nil
		}
	}
	return "", fmt.Errorf("no master serves slot %d", slot)
}

// Masters returns the addresses of the masters that serve slots, as a
// running node sees them.
func (c *ClusterServer) Masters(ctx context.Context) ([]string, error) {
	ns, err := c.view(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range ns {
		if n.isMaster && len(n.slots) > 0 && !n.failed {
			out = append(out, n.addr)
		}
	}
	slices.Sort(out)
	return out, nil
}

func servesSlot(ranges []string, slot int) bool {
	for _, r := range ranges {
		if strings.HasPrefix(r, "[") {
			continue // a slot being migrated or imported
		}
		lo, hi, found := strings.Cut(r, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if found {
			b, _ = strconv.Atoi(hi)
		}
		if a <= slot && slot <= b {
			return true
		}
	}
	return false
}

// ReplicaOf returns the address of a replica of the master at addr that
// the master itself lists, waiting up to five seconds for one.
func (c *ClusterServer) ReplicaOf(ctx context.Context, master string) (string, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ns, err := nodes(ctx, master)
		if err != nil {
			return "", err
		}
		var id string
		for _, n := range ns {
			if n.myself {
				id = n.id
			}
		}
		for _, n := range ns {
			if id != "" && n.master == id && !n.failed {
				return n.addr, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("master %s has no replica: %v", master, ns)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Slot returns the hash slot of key, as the node at addr computes it
// (CLUSTER KEYSLOT).
func (c *ClusterServer) Slot(ctx context.Context, key string) (int, error) {
	n, err := admin(c.live()[0], func(cl *redis.Client) (int64, error) { return cl.ClusterKeySlot(ctx, key).Result() })
	return int(n), err
}

// WaitStable waits until every running node sees every slot served
// (cluster_state:ok), all of them agree on which master serves which slots,
// every running node is a master with slots or a replica, and every
// running replica is in sync with its master, which counts it online.
func (c *ClusterServer) WaitStable(ctx context.Context) error {
	var last error
	for {
		if last = c.stable(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not stable: %w", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *ClusterServer) stable(ctx context.Context) error {
	infos := map[string]string{}
	for _, a := range c.live() {
		info, err := admin(a, func(cl *redis.Client) (string, error) {
			return cl.Info(ctx, "replication").Result()
		})
		if err != nil {
			return err
		}
		infos[a] = info
	}
	var want string
	for _, a := range c.live() {
		info := infos[a]
		if strings.Contains(info, "role:slave") {
			if !strings.Contains(info, "master_link_status:up") || strings.Contains(info, "master_sync_in_progress:1") {
				return fmt.Errorf("replica %s is not in sync", a)
			}
			// Its master counts it for WAIT once it is online: after its
			// first acknowledgement, up to a second after its sync.
			host, port := infoField(info, "master_host"), infoField(info, "master_port")
			_, me, _ := net.SplitHostPort(a)
			if !strings.Contains(infos[net.JoinHostPort(host, port)], ",port="+me+",state=online,") {
				return fmt.Errorf("replica %s is not online at its master %s:%s", a, host, port)
			}
		}
		ci, err := admin(a, func(cl *redis.Client) (string, error) { return cl.ClusterInfo(ctx).Result() })
		if err != nil {
			return err
		}
		if !strings.Contains(ci, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state is not ok", a)
		}
		ns, err := nodes(ctx, a)
		if err != nil {
			return err
		}
		var masters []string
		for _, n := range ns {
			if n.myself && n.isMaster && len(n.slots) == 0 {
				// A master that lost its slots to a failover, before it
				// turns into a replica.
				return fmt.Errorf("%s is a master without slots", a)
			}
			if n.isMaster && len(n.slots) > 0 {
				masters = append(masters, n.addr+" "+strings.Join(n.slots, " "))
			}
		}
		slices.Sort(masters)
		got := strings.Join(masters, "\n")
		if want == "" {
			want = got
		} else if got != want {
			return fmt.Errorf("nodes disagree on the slots:\n%s\n---\n%s", want, got)
		}
	}
	return nil
}

// MigrateOptions shape a slot migration.
type MigrateOptions struct {
	// Batch is the number of keys per MIGRATE; 0 means 1 (the slowest
	// migration, with the most moments at which a slot's keys are split
	// between two nodes).
	Batch int
	// Pause is the time between two MIGRATEs, during which clients run
	// against a slot whose keys are split.
	Pause time.Duration
}

// MigrateSlot moves slot to the master at to, as redis-cli --cluster
// reshard does it (CLUSTER SETSLOT IMPORTING and MIGRATING, MIGRATE of every
// key, CLUSTER SETSLOT NODE on every master), and returns the number of
// keys it moved.
func (c *ClusterServer) MigrateSlot(ctx context.Context, slot int, to string, opts MigrateOptions) (int, error) {
	if opts.Batch <= 0 {
		opts.Batch = 1
	}
	from, err := c.Master(ctx, slot)
	if err != nil {
		return 0, err
	}
	if from == to {
		return 0, fmt.Errorf("slot %d is already on %s", slot, to)
	}
	myID := func(addr string) (string, error) {
		return admin(addr, func(cl *redis.Client) (string, error) { return cl.Do(ctx, "cluster", "myid").Text() })
	}
	fromID, err := myID(from)
	if err != nil {
		return 0, err
	}
	toID, err := myID(to)
	if err != nil {
		return 0, err
	}
	if _, err := c.Do(ctx, to, "cluster", "setslot", slot, "importing", fromID); err != nil {
		return 0, fmt.Errorf("setslot importing on %s: %w", to, err)
	}
	if _, err := c.Do(ctx, from, "cluster", "setslot", slot, "migrating", toID); err != nil {
		return 0, fmt.Errorf("setslot migrating on %s: %w", from, err)
	}
	host, port, _ := net.SplitHostPort(to)
	moved := 0
	for {
		keys, err := admin(from, func(cl *redis.Client) ([]string, error) {
			return cl.ClusterGetKeysInSlot(ctx, slot, opts.Batch).Result()
		})
		if err != nil {
			return moved, err
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if _, err := c.Do(ctx, from, args...); err != nil {
			return moved, fmt.Errorf("migrate %d keys: %w", len(keys), err)
		}
		moved += len(keys)
		if opts.Pause > 0 {
			time.Sleep(opts.Pause)
		}
	}
	// The new owner first, then the old one, then the others (as
	// redis-cli does), so that the slot is never without an owner.
	if _, err := c.Do(ctx, to, "cluster", "setslot", slot, "node", toID); err != nil {
		return moved, err
	}
	if _, err := c.Do(ctx, from, "cluster", "setslot", slot, "node", toID); err != nil {
		return moved, err
	}
	ns, err := c.view(ctx)
	if err != nil {
		return moved, err
	}
	for _, n := range ns {
		if n.isMaster && n.addr != to && n.addr != from && !n.failed {
			// A node the view still calls a master may have become a
			// replica; it learns the slot's owner from the others.
			if _, err := c.Do(ctx, n.addr, "cluster", "setslot", slot, "node", toID); err != nil && !notMaster(err) {
				return moved, err
			}
		}
	}
	return moved, nil
}

// notMaster reports whether err is a node's refusal of a SETSLOT because it
// is not a master (any more, or not yet as the view said).
func notMaster(err error) bool {
	return err != nil && strings.Contains(err.Error(), "only with masters")
}

// MigrateUntil moves slot from its master to another one, and on, again
// and again (waiting for the cluster to agree after each move) until stop
// is closed, and returns how many moves it completed.
func (c *ClusterServer) MigrateUntil(ctx context.Context, slot int, opts MigrateOptions, stop <-chan struct{}) (int, error) {
	moves, retries := 0, 0
	for {
		select {
		case <-stop:
			return moves, nil
		default:
		}
		if err := c.WaitStable(ctx); err != nil {
			return moves, err
		}
		from, err := c.Master(ctx, slot)
		if err != nil {
			return moves, err
		}
		masters, err := c.Masters(ctx)
		if err != nil {
			return moves, err
		}
		i := slices.Index(masters, from)
		if i < 0 || len(masters) < 2 {
			return moves, fmt.Errorf("slot %d: master %s is not among %v", slot, from, masters)
		}
		if _, err := c.MigrateSlot(ctx, slot, masters[(i+1)%len(masters)], opts); err != nil {
			// The view that named the masters was behind a node's role:
			// look again (a new move takes up a half-done one).
			if notMaster(err) && retries < 50 {
				retries++
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return moves, err
		}
		moves++
	}
}

// WaitAcked waits until a replica of the master at addr acknowledges its
// writes again (WAIT 1 after a SET of key, which must be in a slot of that
// master; it expires after a second). A replica that has just synced can
// be online for its master and yet not acknowledge for up to a second.
func (c *ClusterServer) WaitAcked(ctx context.Context, addr, key string) error {
	for {
		n, err := admin(addr, func(cl *redis.Client) (int64, error) {
			var wait *redis.Cmd
			_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, 1, time.Second)
				wait = p.Do(ctx, "wait", 1, 100)
				return nil
			})
			if err != nil {
				return 0, err
			}
			return wait.Int64()
		})
		if err == nil && n >= 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no replica of %s acknowledges: %v: %w", addr, err, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Failover is when a hard failover (HardFailover) cut the replica off,
// killed the master, and saw the replica take over.
type Failover struct {
	Cut, Killed, Promoted time.Time
}

// HardFailover cuts replica off from master (the replica paused, the
// master's replication links closed), so that the master's next writes
// reach no replica, waits cutFor, kills the master (SIGKILL) and lets the
// replica run again. The cluster promotes it after cluster-node-timeout
// and an election; HardFailover returns when it is a master.
func (c *ClusterServer) HardFailover(ctx context.Context, master, replica string, cutFor time.Duration) (Failover, error) {
	var f Failover
	c.Node(replica).Pause()
	if _, err := c.Do(ctx, master, "client", "kill", "type", "replica"); err != nil {
		c.Node(replica).Resume()
		return f, err
	}
	f.Cut = time.Now()
	time.Sleep(cutFor)
	f.Killed = time.Now()
	c.Node(master).Kill()
	c.Node(replica).Resume()
	err := c.WaitMaster(ctx, replica)
	f.Promoted = time.Now()
	return f, err
}

// Rejoin starts the server at dead again, which comes back empty (no
// persistence) as a replica of the node that took over from it, master,
// and returns once the cluster is stable and master's writes are
// acknowledged again (WaitAcked with key).
func (c *ClusterServer) Rejoin(ctx context.Context, dead, master, key string) error {
	c.Node(dead).Start()
	if err := c.WaitStable(ctx); err != nil {
		return err
	}
	return c.WaitAcked(ctx, master, key)
}

// running reports whether the server process runs.
func (s *RedisServer) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// infoField returns the value of name in an INFO reply.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	return ""
}

// Role returns "master" or "slave" as the node at addr reports it.
func (c *ClusterServer) Role(ctx context.Context, addr string) (string, error) {
	info, err := admin(addr, func(cl *redis.Client) (string, error) { return cl.Info(ctx, "replication").Result() })
	if err != nil {
		return "", err
	}
	if role := infoField(info, "role"); role != "" {
		return role, nil
	}
	return "", fmt.Errorf("%s: no role in INFO replication", addr)
}

// WaitMaster waits until the node at addr is a master that serves slots.
func (c *ClusterServer) WaitMaster(ctx context.Context, addr string) error {
	for {
		ns, err := nodes(ctx, addr)
		if err == nil {
			for _, n := range ns {
				if n.myself && n.isMaster && len(n.slots) > 0 {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not become a master: %w", addr, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
