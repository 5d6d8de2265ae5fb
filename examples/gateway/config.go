package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// Environment variables, with the design's names and defaults.
const (
	envIdleTimeout = "GATEWAY_IDLE_TIMEOUT_SECONDS" // default 300
	envHeartbeat   = "HEARTBEAT_INTERVAL"           // default 30
	envOrphanGrace = "ORPHAN_GRACE_PERIOD_SECONDS"  // default 60
)

type config struct {
	addr, template, agentAddr, runtimeAddr, label, docker, buildDir string
	reload                                                          time.Duration
	drain                                                           time.Duration
	idleTimeout, heartbeat, orphanGrace                             time.Duration
	log                                                             *slog.Logger
}

// defaultTemplate is the demo template beside this file.
func defaultTemplate() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "template.yaml")
}

func parseGateway(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address of the Lambda Invoke API, /metrics and /healthz")
	fs.StringVar(&c.template, "template", defaultTemplate(), "SAM template with the functions (reloaded when it changes)")
	fs.StringVar(&c.agentAddr, "agent", "", "gRPC address of a separate agent; empty runs the agent in this process")
	fs.StringVar(&c.runtimeAddr, "runtime-addr", "127.0.0.1:0", "address of the Runtime API the workers poll")
	fs.StringVar(&c.label, "label", "ttlkit-gateway", "label of this gateway's workers (in-process agent)")
	fs.StringVar(&c.docker, "docker", "", "Docker engine for image functions (in-process agent), e.g. unix:///var/run/docker.sock")
	fs.StringVar(&c.buildDir, "build-dir", "", "where Go functions are built; empty means a temporary directory")
	fs.DurationVar(&c.reload, "reload", 2*time.Second, "how often the template is checked for changes")
	fs.DurationVar(&c.drain, "drain-timeout", 30*time.Second, "how long SIGTERM waits for in-flight invocations")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.idleTimeout, err = seconds(getenv, envIdleTimeout, 300); err != nil {
		return c, err
	}
	if c.heartbeat, err = seconds(getenv, envHeartbeat, 30); err != nil {
		return c, err
	}
	if c.orphanGrace, err = seconds(getenv, envOrphanGrace, 60); err != nil {
		return c, err
	}
	if c.heartbeat <= 0 {
		return c, fmt.Errorf("%s must be positive", envHeartbeat)
	}
	c.log, err = logger(*level, stderr)
	return c, err
}

func logger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// seconds reads an environment variable of seconds (fractions allowed).
func seconds(getenv func(string) string, name string, def float64) (time.Duration, error) {
	v := def
	if s := getenv(name); s != "" {
		var err error
		if v, err = strconv.ParseFloat(s, 64); err != nil || v < 0 {
			return 0, errors.New(name + ": " + strconv.Quote(s) + " is not a number of seconds >= 0")
		}
	}
	return time.Duration(v * float64(time.Second)), nil
}
