package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
)

func TestWorkspaceTokens(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k, err := auth.New("secret-of-sixteen-bytes", "admin-token-of-16-bytes", func() time.Time { return now })
	require.NoError(t, err)
	exp := now.Add(time.Hour)
	tok := k.WorkspaceToken("ws-1", exp)
	got, err := k.CheckWorkspace("ws-1", tok)
	require.NoError(t, err)
	assert.True(t, got.Equal(exp))

	e, mac, _ := strings.Cut(tok, ".")
	for name, bad := range map[string]string{
		"another workspace": "ws-2",
	} {
		_, err := k.CheckWorkspace(bad, tok)
		assert.ErrorIs(t, err, auth.ErrInvalid, name)
	}
	for name, v := range map[string]string{
		"empty":           "",
		"no dot":          e + mac,
		"longer expiry":   e + "0." + mac,
		"other expiry":    "1900000000." + mac,
		"short mac":       e + "." + mac[:42],
		"not base64":      e + "." + strings.Repeat("!", 43),
		"negative":        "-1." + mac,
		"huge":            "99999999999999." + mac,
		"admin cookie":    k.AdminCookie(exp),
		"two dots":        e + "." + mac + ".x",
		"flipped mac bit": e + "." + string(mac[0]^1) + mac[1:],
	} {
		_, err := k.CheckWorkspace("ws-1", v)
		require.Error(t, err, name)
		if name == "empty" {
			assert.ErrorIs(t, err, auth.ErrMissing)
		} else {
			assert.ErrorIs(t, err, auth.ErrInvalid, name)
		}
	}
	_, err = k.CheckWorkspace("ws-1", k.WorkspaceToken("ws-1", now))
	assert.ErrorIs(t, err, auth.ErrExpired, "expires at its expiry")
	assert.NotEqual(t, k.BackendKey("ws-1"), k.BackendKey("ws-2"))
}

func TestAdmin(t *testing.T) {
	k, err := auth.New("secret-of-sixteen-bytes", "admin-token-of-16-bytes", nil)
	require.NoError(t, err)
	assert.NoError(t, k.CheckAdminToken("admin-token-of-16-bytes"))
	assert.ErrorIs(t, k.CheckAdminToken(""), auth.ErrMissing)
	assert.ErrorIs(t, k.CheckAdminToken("admin-token-of-16-byte"), auth.ErrInvalid)
	assert.NoError(t, k.CheckAdminCookie(k.AdminCookie(time.Now().Add(time.Minute))))
	assert.ErrorIs(t, k.CheckAdminCookie(k.AdminCookie(time.Now().Add(-time.Minute))), auth.ErrExpired)
	assert.ErrorIs(t, k.CheckAdminCookie(k.WorkspaceToken("admin", time.Now().Add(time.Minute))), auth.ErrInvalid)

	for _, c := range []struct{ secret, admin, field string }{
		{"short", "admin-token-of-16-bytes", "secret"},
		{"secret-of-sixteen-bytes", "short", "admin token"},
	} {
		_, err := auth.New(c.secret, c.admin, nil)
		assert.ErrorContains(t, err, c.field)
	}
}
