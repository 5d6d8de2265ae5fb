package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestDefaultsAreTheDesigns: with nothing set, every parameter is the
// design's, and the modal budget is 50 − 5 − 10 = 35.
func TestDefaultsAreTheDesigns(t *testing.T) {
	c, err := parseConfig(nil, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), c)
	assert.Equal(t, 10, c.ReservedSuggestUnits())
	assert.Equal(t, 35, c.ModalBudget())
	assert.Equal(t, "127.0.0.1:8080", c.Addr)
	assert.Equal(t, Thresholds{70, 85, 60}, c.CPU)
	assert.Equal(t, Thresholds{75, 90, 70}, c.Memory)
	assert.Equal(t, Thresholds{50, 100, 50}, c.SwapMB)
	assert.Equal(t, []time.Duration{300 * time.Second, 30 * time.Second, 45 * time.Second, 10 * time.Second, 60 * time.Second, 24 * time.Hour, time.Hour},
		[]time.Duration{c.ModalTTL, c.HeartbeatInterval, c.HeartbeatGrace, c.CleanupInterval, c.OverloadHold, c.MetricsRetention, c.MetricsPurgeInterval})
	assert.Len(t, c.Cameras, 12)
}

// TestEveryVariableSetsItsSetting, and a flag wins over its variable.
func TestEveryVariableSetsItsSetting(t *testing.T) {
	vars := map[string]string{
		"LISTEN_ADDR": ":9000", "ALLOWED_HOSTS": "cams.example, .corp.example", "STORE": "redis", "STORE_DSN": "redis://x:6379/1", "REDIS_PREFIX": "cams2",
		"CAMERAS": "cam_a, cam_b", "SESSION_KEY": "a-long-enough-session-key", "SUGGEST_ENABLED": "false", "LOG_LEVEL": "debug",
		"SESSION_TTL_SEC":    "7200",
		"TOTAL_STREAM_UNITS": "100", "MAX_UI_USERS": "20", "RESERVED_BASELINE_UNITS": "10", "SUB_STREAM_COST": "2", "MAIN_STREAM_COST": "5",
		"MODAL_TTL_SEC": "600", "HEARTBEAT_INTERVAL_SEC": "20", "HEARTBEAT_GRACE_SEC": "1m", "LEASE_CLEANUP_SEC": "5",
		"CPU_WARN_PERCENT": "60", "CPU_TRIP_PERCENT": "80", "CPU_RECOVER_PERCENT": "50",
		"MEMORY_WARN_PERCENT": "65", "MEMORY_TRIP_PERCENT": "85", "MEMORY_RECOVER_PERCENT": "60",
		"SWAP_WARN_MB": "10", "SWAP_TRIP_MB": "20", "SWAP_RECOVER_MB": "5", "OVERLOAD_RECOVER_SEC": "30", "LOAD_SAMPLE_SEC": "0.5",
		"METRICS_INTERVAL_SEC": "60", "METRICS_RETENTION_HOURS": "48", "METRICS_PURGE_INTERVAL_SEC": "1800",
	}
	require.Len(t, vars, len(settings), "one variable per setting")
	c, err := parseConfig(nil, env(vars), io.Discard)
	require.NoError(t, err)
	want := Config{
		Addr: ":9000", Hosts: []string{"cams.example", ".corp.example"}, Store: "redis", DSN: "redis://x:6379/1", RedisPrefix: "cams2", Cameras: []string{"cam_a", "cam_b"},
		SessionKey: "a-long-enough-session-key", SessionTTL: 2 * time.Hour, Suggest: false, LogLevel: slog.LevelDebug,
		TotalStreamUnits: 100, MaxUIUsers: 20, ReservedBaselineUnits: 10, SubStreamCost: 2, MainStreamCost: 5,
		ModalTTL: 10 * time.Minute, HeartbeatInterval: 20 * time.Second, HeartbeatGrace: time.Minute, CleanupInterval: 5 * time.Second,
		CPU: Thresholds{60, 80, 50}, Memory: Thresholds{65, 85, 60}, SwapMB: Thresholds{10, 20, 5},
		OverloadHold: 30 * time.Second, LoadInterval: 500 * time.Millisecond,
		MetricsInterval: time.Minute, MetricsRetention: 48 * time.Hour, MetricsPurgeInterval: 30 * time.Minute,
	}
	assert.Equal(t, want, c)
	assert.Equal(t, 70, c.ModalBudget())

	c, err = parseConfig([]string{"-modal-ttl", "2m", "-total-stream-units", "60", "-suggest"}, env(vars), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, c.ModalTTL, "the flag wins")
	assert.Equal(t, 60, c.TotalStreamUnits)
	assert.True(t, c.Suggest)
	assert.Equal(t, 20*time.Second, c.HeartbeatInterval, "the variable still applies")
}

// TestBadSettingsAreRefused with a message naming the setting and value.
func TestBadSettingsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		vars map[string]string
		want string
	}{
		{nil, map[string]string{"MODAL_TTL_SEC": "soon"}, `MODAL_TTL_SEC: "soon" is neither a number of seconds nor a duration`},
		{nil, map[string]string{"TOTAL_STREAM_UNITS": "14"}, "the modal budget, TOTAL_STREAM_UNITS − RESERVED_BASELINE_UNITS − MAX_UI_USERS (14 − 5 − 10 = -1), is below MAIN_STREAM_COST (2)"},
		{[]string{"-store", "mysql"}, nil, "-store mysql needs -dsn (STORE_DSN)"},
		{[]string{"-store", "sqlite"}, nil, `STORE ("sqlite") must be memory, mysql, postgres or redis`},
		{[]string{"-heartbeat-interval", "45"}, nil, "HEARTBEAT_INTERVAL_SEC (45s) must be below HEARTBEAT_GRACE_SEC (45s), or leases lapse between heartbeats"},
		{[]string{"-sub-stream-cost", "2"}, nil, "MAIN_STREAM_COST (2) must be above SUB_STREAM_COST (2)"},
		{[]string{"-cameras", "cam 1"}, nil, `CAMERAS: "cam 1" is not a camera id (a-z, 0-9, _; at most 64)`},
		{[]string{"-session-key", "short"}, nil, "SESSION_KEY is 5 bytes; it needs at least 16"},
		{[]string{"-session-ttl", "60"}, nil, "SESSION_TTL_SEC (1m0s) must be at least MODAL_TTL_SEC (5m0s)"},
		{[]string{"-cpu-recover", "90"}, nil, `overload thresholds: hysteresis: signal "cpu": Recover (90) above Trip (85)`},
		{[]string{"-swap-trip", "40"}, nil, `overload thresholds: hysteresis: signal "swap": Recover (50) above Trip (40)`},
		{[]string{"-cleanup-interval", "0"}, nil, "LEASE_CLEANUP_SEC (0s) must be positive"},
		{[]string{"8080"}, nil, `unexpected argument "8080"`},
	} {
		_, err := parseConfig(tc.args, env(tc.vars), io.Discard)
		require.EqualError(t, err, tc.want, "%v %v", tc.args, tc.vars)
	}
}

// TestHelpNamesEveryVariable: -help lists each flag with its variable.
func TestHelpNamesEveryVariable(t *testing.T) {
	var out bytes.Buffer
	_, err := parseConfig([]string{"-help"}, env(nil), &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	for _, s := range settings {
		assert.Contains(t, out.String(), "-"+s.flag+" ")
		assert.Contains(t, out.String(), "("+s.env+")")
	}
}
