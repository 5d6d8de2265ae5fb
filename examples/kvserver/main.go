// Command kvserver is a small Redis-compatible server whose keyspace is an
// expiry.Map: keys expire passively on access and actively by sampling, as
// in Redis. It speaks RESP2 over TCP, so redis-cli and Redis client
// libraries can use it.
//
//	go run ./examples/kvserver -addr 127.0.0.1:6380
//	redis-cli -p 6380 SET greeting hello EX 10
//
// It answers Redis's string and expiry commands (SET with all its options,
// GET, SETEX, PSETEX, GETEX, GETDEL, MGET, MSET, STRLEN, DEL, EXISTS, TYPE,
// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX, XX, GT and LT, TTL, PTTL,
// EXPIRETIME, PEXPIRETIME, PERSIST, KEYS, SCAN) on 16 databases (SELECT,
// DBSIZE, FLUSHDB, FLUSHALL), and PING, ECHO, TIME, INFO, COMMAND, HELLO
// (RESP2 only), CLIENT, AUTH and QUIT, with Redis's replies and error
// messages.
//
// It listens on the loopback interface by default. -requirepass sets a
// password that clients must AUTH with; without one, protected mode (as
// Redis's) refuses clients from other hosts.
//
// Flags tune active expiry (-interval, -sample, -threshold, -budget, or the
// -redis7 preset) and the protocol limits. /healthz and /metrics are
// served on -http (127.0.0.1:9380). SIGINT or SIGTERM stops it
// gracefully: it stops accepting, closes the connections and stops expiry.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/expiry"
)

func main() {
	addr, cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		err = fmt.Errorf("kvserver: %w", err)
	} else {
		err = run(ctx, ln, cfg, cfg.Logger)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// redis7Options is Redis 7's expiry tuning at its default effort: a cycle
// every 100 ms (hz 10), 20 keys, repeat above 10 %, a quarter of the
// interval per cycle. It is also expiry's default.
func redis7Options() expiry.Options {
	return expiry.Options{Interval: 100 * time.Millisecond, SampleSize: 20, Threshold: 0.10}
}

// parseFlags turns the command line into the listen address and the
// server's configuration. Bad values are checked by New; parseFlags refuses
// what New cannot see (stray arguments).
func parseFlags(args []string, stderr io.Writer) (string, Config, error) {
	fs := flag.NewFlagSet("kvserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:6380", "TCP address to listen on")
	redis7 := fs.Bool("redis7", false, "start from Redis 7's expiry tuning (100ms, 20 keys, 10%, 25% budget)")
	interval := fs.Duration("interval", 0, "active expiry period (default 1s, or 100ms with -redis7)")
	sample := fs.Int("sample", 0, "keys with a deadline sampled per round (default 20)")
	threshold := fs.Float64("threshold", 0, "repeat a round at once while more than this share was expired (default 0.25, or 0.10 with -redis7)")
	budget := fs.Float64("budget", 0, "share of the interval one expiry cycle may run (default 0.25)")
	maxBulk := fs.Int64("max-bulk-len", DefaultMaxBulkLen, "largest accepted bulk string in bytes (Redis proto-max-bulk-len)")
	maxArgs := fs.Int("max-args", DefaultMaxArgs, "largest accepted number of arguments of one command")
	maxClients := fs.Int("max-clients", DefaultMaxClients, "most open connections (Redis maxclients)")
	requirePass := fs.String("requirepass", os.Getenv("KVSERVER_REQUIREPASS"), "password clients must AUTH with (Redis requirepass; default $KVSERVER_REQUIREPASS)")
	protected := fs.Bool("protected-mode", true, "without a password, refuse clients that are not on the loopback interface (Redis protected-mode)")
	verbose := fs.Bool("v", false, "log protocol errors of clients")
	httpAddr := fs.String("http", "127.0.0.1:9380", "HTTP address of /healthz and /metrics (Prometheus); empty: none")
	hosts := fs.String("allowed-hosts", os.Getenv("KVSERVER_ALLOWED_HOSTS"), "comma-separated host names the HTTP server answers to besides loopback names and IP addresses (default $KVSERVER_ALLOWED_HOSTS)")
	if err := fs.Parse(args); err != nil {
		return "", Config{}, err
	}
	if fs.NArg() > 0 {
		return "", Config{}, fmt.Errorf("kvserver: unexpected argument %q", fs.Arg(0))
	}
	var allowed []string
	if *hosts != "" {
		var err error
		if allowed, err = webguard.ParseHosts(*hosts); err != nil {
			return "", Config{}, fmt.Errorf("kvserver: -allowed-hosts: %w", err)
		}
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var opts expiry.Options
	if *redis7 {
		opts = redis7Options()
	}
	// Explicit flags override the preset.
	budgetSet := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "interval":
			opts.Interval = *interval
		case "sample":
			opts.SampleSize = *sample
		case "threshold":
			opts.Threshold = *threshold
		case "budget":
			budgetSet = true
		}
	})
	if budgetSet {
		// The flag is a share of the interval; Budget is a duration.
		base := cmp.Or(opts.Interval, time.Second)
		if base < 0 {
			base = time.Second
		}
		opts.Budget = time.Duration(*budget * float64(base))
		if opts.Budget == 0 && *budget != 0 {
			opts.Budget = 1
		}
	}
	opts.Logger = log
	return *addr, Config{
		Limits:               Limits{MaxBulkLen: *maxBulk, MaxArgs: *maxArgs},
		MaxClients:           *maxClients,
		RequirePass:          *requirePass,
		DisableProtectedMode: !*protected,
		Expiry:               opts,
		Logger:               log,
		HTTPAddr:             *httpAddr,
		AllowedHosts:         allowed,
	}, nil
}

// run serves on ln until ctx ends, then shuts the server down.
func run(ctx context.Context, ln net.Listener, cfg Config, log *slog.Logger) error {
	srv, err := New(cfg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	httpDone := make(chan error, 1)
	httpCtx, stopHTTP := context.WithCancel(ctx)
	defer stopHTTP()
	if cfg.HTTPAddr != "" {
		hln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			_ = ln.Close()
			return errors.Join(fmt.Errorf("kvserver: -http: %w", err), srv.Close())
		}
		log.Info("kvserver: metrics", "url", "http://"+hln.Addr().String()+"/metrics")
		go func() { httpDone <- srv.serveHTTP(httpCtx, hln, cfg.AllowedHosts) }()
	} else {
		httpDone <- nil
	}
	log.Info("kvserver: listening", "addr", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info("kvserver: shutting down")
		err := srv.Close()
		<-served
		stopHTTP()
		return errors.Join(err, <-httpDone)
	case err := <-served:
		stopHTTP()
		return errors.Join(err, srv.Close(), <-httpDone)
	}
}
