package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
)

// EnvToken is the environment variable the agent takes its Options.Token
// from (an environment, unlike a command line, is not shown to other
// users). Its commands do not inherit it.
const EnvToken = "SANDBOX_AGENT_TOKEN"

// Main is the agent's program: it serves on -listen over -dir until ctx
// ends (SIGTERM), then kills the commands still running and every process
// they started. The example's "agent" subcommand and the image's own small
// binary (sandbox-agent) both run it.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	dir := fs.String("dir", "", "work directory (created if missing)")
	maxOutput := fs.Int64("max-output", DefaultMaxOutput, "bytes of stdout, and of stderr, an exec returns")
	allowed := fs.String("allowed-hosts", "", "comma-separated Host names answered besides loopback names and IP addresses (.name: it and its subdomains)")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelWarn, "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	hosts, err := webguard.ParseHosts(*allowed)
	if err != nil {
		return fmt.Errorf("-allowed-hosts: %w", err)
	}
	// The agent is this process's only business: a subreaper, it kills
	// what a command leaves when it kills its own shim.
	srv, err := New(Options{Dir: *dir, MaxOutput: *maxOutput, Token: os.Getenv(EnvToken), Hosts: hosts, Subreaper: true,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return errors.Join(err, srv.Close())
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "agent listening on %s\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err := <-served:
		return errors.Join(err, srv.Close())
	}
	// The commands die with the sandbox.
	cerr := srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	<-served
	return cerr
}

// ServeIfAgent runs Main and exits when the program was started as
// "<program> agent [flags]": the first call in the main (or TestMain) of a
// program that doubles as the sandboxes' agent. Otherwise it returns.
func ServeIfAgent() {
	if len(os.Args) < 2 || os.Args[1] != "agent" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Main(ctx, os.Args[2:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
