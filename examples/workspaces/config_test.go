package main

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAllowedHostsSetting: ALLOWED_HOSTS and -allowed-hosts take host
// names; a value that is not one stops the start with an error naming the
// setting, before anything listens.
func TestAllowedHostsSetting(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	c, err := parseConfig(nil, env("ALLOWED_HOSTS", " IDE.example.com, .corp.example"), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"ide.example.com", ".corp.example"}, c.AllowedHosts)
	c, err = parseConfig([]string{"-allowed-hosts", "other.example"}, env("ALLOWED_HOSTS", "ide.example.com"), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"other.example"}, c.AllowedHosts, "a flag wins")

	// A cancelled context: a run that wrongly started would stop at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, bad := range []string{"http://ide.example.com", "ide.example.com:8080", "a..b", "ide example"} {
		var stdout, stderr bytes.Buffer
		err := run(ctx, nil, env("ALLOWED_HOSTS", bad), &stdout, &stderr)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "ALLOWED_HOSTS", bad)
		assert.Empty(t, stdout.String(), "%s: nothing started", bad)
		err = run(ctx, []string{"-allowed-hosts", bad}, env(), &stdout, io.Discard)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "-allowed-hosts", bad)
		assert.Empty(t, stdout.String(), "%s: nothing started", bad)
	}
}
