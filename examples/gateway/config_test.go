package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigDefaults(t *testing.T) {
	c, err := parseGateway(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", c.addr)
	assert.Equal(t, defaultTemplate(), c.template)
	assert.Empty(t, c.agentAddr, "the agent runs in process")
	assert.Equal(t, 300*time.Second, c.idleTimeout, envIdleTimeout)
	assert.Equal(t, 30*time.Second, c.heartbeat, envHeartbeat)
	assert.Equal(t, 60*time.Second, c.orphanGrace, envOrphanGrace)
}

func TestConfigEnvironment(t *testing.T) {
	env := map[string]string{envIdleTimeout: "1.5", envHeartbeat: "0.2", envOrphanGrace: "0"}
	c, err := parseGateway([]string{"-addr", ":9000", "-agent", "127.0.0.1:50051"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, ":9000", c.addr)
	assert.Equal(t, "127.0.0.1:50051", c.agentAddr)
	assert.Equal(t, 1500*time.Millisecond, c.idleTimeout)
	assert.Equal(t, 200*time.Millisecond, c.heartbeat)
	assert.Zero(t, c.orphanGrace)

	for _, bad := range []struct{ name, value, want string }{
		{envIdleTimeout, "5m", `GATEWAY_IDLE_TIMEOUT_SECONDS: "5m" is not a number of seconds >= 0`},
		{envOrphanGrace, "-1", `ORPHAN_GRACE_PERIOD_SECONDS: "-1"`},
		{envHeartbeat, "0", "HEARTBEAT_INTERVAL must be positive"},
	} {
		_, err := parseGateway(nil, func(k string) string {
			if k == bad.name {
				return bad.value
			}
			return ""
		}, io.Discard)
		assert.ErrorContains(t, err, bad.want)
	}
	_, err = parseGateway([]string{"-log-level", "loud"}, func(string) string { return "" }, io.Discard)
	assert.ErrorContains(t, err, "-log-level")
}

// The secrets come from the environment, a flag overrides each, and -h
// does not print them.
func TestConfigSecrets(t *testing.T) {
	env := map[string]string{envAPIKey: "key-from-env", envAgentToken: "token-from-env"}
	getenv := func(k string) string { return env[k] }
	c, err := parseGateway(nil, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "key-from-env", c.apiKey)
	assert.Equal(t, "token-from-env", c.agentToken)
	c, err = parseGateway([]string{"-api-key", "key-from-flag", "-agent-token", "token-from-flag"}, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "key-from-flag", c.apiKey)
	assert.Equal(t, "token-from-flag", c.agentToken)
	c, err = parseGateway(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Empty(t, c.apiKey, "no key by default")

	var help strings.Builder
	_, err = parseGateway([]string{"-h"}, getenv, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, help.String(), "-api-key")
	assert.NotContains(t, help.String(), "from-env")
}
