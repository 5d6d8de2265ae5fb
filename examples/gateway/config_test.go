package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
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
	assert.Equal(t, time.Second, c.eventRetry, "-event-retry-delay")
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
	_, err = parseGateway([]string{"-event-retry-delay", "0s"}, func(string) string { return "" }, io.Discard)
	assert.ErrorContains(t, err, "-event-retry-delay must be positive")
	c, err = parseGateway([]string{"-event-retry-delay", "250ms"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 250*time.Millisecond, c.eventRetry)
}

// The secrets come from the environment, a flag overrides each, and -h
// does not print them. Without a key pair, one is made; half a pair, a key
// id that does not fit an Authorization header, or the old API key, is a
// clear error.
func TestConfigSecrets(t *testing.T) {
	env := map[string]string{envAccessKeyID: "AKIDFROMENV", envSecretAccessKey: "secret-from-env", envAgentToken: "token-from-env"}
	getenv := func(k string) string { return env[k] }
	c, err := parseGateway(nil, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, sigv4.Credentials{AccessKeyID: "AKIDFROMENV", SecretAccessKey: "secret-from-env"}, c.creds)
	assert.False(t, c.madeCreds)
	assert.Equal(t, "token-from-env", c.agentToken)
	c, err = parseGateway([]string{"-access-key-id", "AKIDFROMFLAG", "-secret-access-key", "secret-from-flag", "-agent-token", "token-from-flag"}, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, sigv4.Credentials{AccessKeyID: "AKIDFROMFLAG", SecretAccessKey: "secret-from-flag"}, c.creds)
	assert.Equal(t, "token-from-flag", c.agentToken)

	c, err = parseGateway(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.True(t, c.madeCreds, "a pair is made when none is set")
	require.NoError(t, c.creds.Check())
	other, err := parseGateway(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.NotEqual(t, c.creds, other.creds, "a new pair each start")

	for _, bad := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{envAccessKeyID: "AKID"}, nil, "GATEWAY_ACCESS_KEY_ID (or -access-key-id) is set but GATEWAY_SECRET_ACCESS_KEY"},
		{map[string]string{envSecretAccessKey: "s"}, nil, "GATEWAY_SECRET_ACCESS_KEY (or -secret-access-key) is set but GATEWAY_ACCESS_KEY_ID"},
		{nil, []string{"-secret-access-key", "s"}, "is set but GATEWAY_ACCESS_KEY_ID"},
		{map[string]string{envAccessKeyID: "AK/ID", envSecretAccessKey: "s"}, nil, `GATEWAY_ACCESS_KEY_ID: access key id "AK/ID"`},
		{map[string]string{envAPIKey: "k"}, nil, "GATEWAY_API_KEY is no longer read"},
	} {
		_, err := parseGateway(bad.args, func(k string) string { return bad.env[k] }, io.Discard)
		assert.ErrorContains(t, err, bad.want)
	}

	var help strings.Builder
	_, err = parseGateway([]string{"-h"}, getenv, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, help.String(), "-secret-access-key")
	assert.Contains(t, help.String(), "-allowed-hosts")
	assert.NotContains(t, help.String(), "from-env")
	assert.NotContains(t, help.String(), "-api-key")
}

// GATEWAY_ALLOWED_HOSTS (or -allowed-hosts, which overrides it) adds names
// to loopback's; a bad one is an error naming where it came from.
func TestConfigAllowedHosts(t *testing.T) {
	c, err := parseGateway(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Empty(t, c.allowedHosts, "loopback names and addresses only")
	env := map[string]string{envAllowedHosts: "gw.example, .corp.example"}
	c, err = parseGateway(nil, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"gw.example", ".corp.example"}, c.allowedHosts)
	c, err = parseGateway([]string{"-allowed-hosts", "flag.example"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"flag.example"}, c.allowedHosts)

	_, err = parseGateway(nil, func(k string) string { return map[string]string{envAllowedHosts: "gw.example:8080"}[k] }, io.Discard)
	assert.ErrorContains(t, err, `GATEWAY_ALLOWED_HOSTS: "gw.example:8080" is not a host name`)
	_, err = parseGateway([]string{"-allowed-hosts", "http://gw.example"}, func(string) string { return "" }, io.Discard)
	assert.ErrorContains(t, err, `-allowed-hosts: "http://gw.example" is not a host name`)
}
