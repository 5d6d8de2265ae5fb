// Package auth decides who reaches what: a workspace only with its own
// token (handed to its owner by the admin API, kept in a cookie scoped to
// the workspace's path), the admin API only with the admin token (or the
// cookie the admin page gets for it), and a workspace's server only from
// the proxy (a per-workspace key only the proxy and that server know).
//
// Every credential is derived from one secret with HMAC-SHA256, so every
// proxy and controller given the same secret agrees without a shared
// table, and nothing needs to be stored per workspace:
//
//	workspace token  "<expiry>.<mac>"  mac = HMAC(secret, "workspace\x00" + id + "\x00" + expiry)
//	admin cookie     "<expiry>.<mac>"  mac = HMAC(secret, "admin\x00" + expiry)
//	backend key      HMAC(secret, "backend\x00" + id)
//
// A token names no workspace: checked against another workspace's id, its
// MAC is wrong. Expiry is Unix seconds; an expired token is refused.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MinSecret is the shortest secret Keys accepts.
const MinSecret = 16

// Errors a check returns. Callers answer every one of them the same way,
// so that a client learns nothing from which it was.
var (
	ErrMissing = errors.New("auth: no credential")
	ErrInvalid = errors.New("auth: credential not valid")
	ErrExpired = errors.New("auth: credential expired")
)

// Keys mints and checks every credential of the system.
type Keys struct {
	secret []byte
	admin  []byte // the admin token
	now    func() time.Time
}

// New returns Keys deriving from secret (at least MinSecret bytes) and
// accepting adminToken on the admin API (at least MinSecret bytes). now is
// the clock for expiry; nil means time.Now.
func New(secret, adminToken string, now func() time.Time) (*Keys, error) {
	if len(secret) < MinSecret {
		return nil, fmt.Errorf("auth: secret is %d bytes; it needs at least %d", len(secret), MinSecret)
	}
	if len(adminToken) < MinSecret {
		return nil, fmt.Errorf("auth: admin token is %d bytes; it needs at least %d", len(adminToken), MinSecret)
	}
	if now == nil {
		now = time.Now
	}
	return &Keys{secret: []byte(secret), admin: []byte(adminToken), now: now}, nil
}

// Random returns a random secret or token of n bytes of entropy, as text.
func Random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (k *Keys) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, k.secret)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// sign returns "<expiry>.<mac>" for the parts and the expiry.
func (k *Keys) sign(exp time.Time, parts ...string) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(k.mac(append(parts, e)...))
}

// verify checks a "<expiry>.<mac>" value against the parts and returns its
// expiry.
func (k *Keys) verify(v string, parts ...string) (time.Time, error) {
	if v == "" {
		return time.Time{}, ErrMissing
	}
	e, m, ok := strings.Cut(v, ".")
	if !ok || len(e) > 12 || len(m) != 43 {
		return time.Time{}, ErrInvalid
	}
	sec, err := strconv.ParseInt(e, 10, 64)
	if err != nil || sec <= 0 {
		return time.Time{}, ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(m)
	if err != nil || !hmac.Equal(got, k.mac(append(parts, e)...)) {
		return time.Time{}, ErrInvalid
	}
	exp := time.Unix(sec, 0)
	if !k.now().Before(exp) {
		return exp, ErrExpired
	}
	return exp, nil
}

// WorkspaceToken returns a token that opens workspace id until exp.
func (k *Keys) WorkspaceToken(id string, exp time.Time) string {
	return k.sign(exp, "workspace", id)
}

// CheckWorkspace checks that token opens workspace id now, and returns
// when it expires.
func (k *Keys) CheckWorkspace(id, token string) (time.Time, error) {
	return k.verify(token, "workspace", id)
}

// CheckAdminToken reports whether token is the admin token.
func (k *Keys) CheckAdminToken(token string) error {
	if token == "" {
		return ErrMissing
	}
	if subtle.ConstantTimeCompare([]byte(token), k.admin) != 1 {
		return ErrInvalid
	}
	return nil
}

// AdminCookie returns the value of an admin page cookie valid until exp.
func (k *Keys) AdminCookie(exp time.Time) string { return k.sign(exp, "admin") }

// CheckAdminCookie checks an admin page cookie.
func (k *Keys) CheckAdminCookie(v string) error {
	_, err := k.verify(v, "admin")
	return err
}

// BackendKey returns the key workspace id's server requires on every
// request: the proxy sends it, and the controller gives it to the server
// when it starts it, so that nobody on the host reaches a workspace's
// server around the proxy.
func (k *Keys) BackendKey(id string) string {
	return hex.EncodeToString(k.mac("backend", id))
}
