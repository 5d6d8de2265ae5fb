package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sessionCookie names the cookie that carries a session.
const sessionCookie = "cam_session"

// activeWindow is how recently a page must have asked for the system status
// (it does every few seconds) to count as an active UI user.
const activeWindow = 15 * time.Second

// Sessions issues and checks session cookies and counts the pages that are
// open. A session is the user of the design: one modal per session. The
// cookie is "<id>.<issued>.<mac>", the MAC an HMAC-SHA256 of id and issue
// time under the key, so a client can neither forge a session, nor take
// another's by guessing, nor keep one alive past its lifetime; it is
// HttpOnly (no script reads it) and SameSite=Lax (other sites' requests do
// not carry it). A session unused for its lifetime has expired: its cookie
// is refused and the browser gets a new session, which holds none of the old
// one's leases. A session in use is reissued, with the same id, once half
// its lifetime has passed.
type Sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // session → last status poll
}

type sessionKey struct{}

// NewSessions returns Sessions signing with key, or with a random key when
// key is empty (sessions then last as long as the process), whose sessions
// expire after ttl without use.
func NewSessions(key string, ttl time.Duration, now func() time.Time) *Sessions {
	k := []byte(key)
	if len(k) == 0 {
		k = make([]byte, 32)
		_, _ = rand.Read(k)
	}
	return &Sessions{key: k, ttl: ttl, now: now, seen: map[string]time.Time{}}
}

func (s *Sessions) mac(idIssued string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(idIssued))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookieValue returns the signed cookie value of session id issued at t.
func (s *Sessions) cookieValue(id string, t time.Time) string {
	v := id + "." + strconv.FormatInt(t.Unix(), 10)
	return v + "." + s.mac(v)
}

// verify returns the session id of a cookie value and when it was issued,
// or "" when the value is forged, malformed or expired.
func (s *Sessions) verify(v string) (string, time.Time) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !hmac.Equal([]byte(v[i+1:]), []byte(s.mac(v[:i]))) {
		return "", time.Time{}
	}
	id, issued, ok := strings.Cut(v[:i], ".")
	sec, err := strconv.ParseInt(issued, 10, 64)
	if !ok || err != nil || len(id) != 22 {
		return "", time.Time{}
	}
	t := time.Unix(sec, 0)
	if age := s.now().Sub(t); age >= s.ttl || age < -time.Minute {
		return "", time.Time{}
	}
	return id, t
}

// Middleware gives every request a session: the one its cookie names when
// the cookie is genuine and unexpired, else a new one, set as a cookie on
// the answer. A session past half its lifetime gets a fresh cookie.
func (s *Sessions) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, issued := "", time.Time{}
		if c, err := r.Cookie(sessionCookie); err == nil {
			id, issued = s.verify(c.Value)
		}
		now := s.now()
		if id == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			id = base64.RawURLEncoding.EncodeToString(b[:])
		}
		if issued.IsZero() || now.Sub(issued) > s.ttl/2 {
			http.SetCookie(w, &http.Cookie{
				Name: sessionCookie, Value: s.cookieValue(id, now), Path: "/", MaxAge: int(s.ttl / time.Second),
				HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
			})
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, id)))
	})
}

var errNoSession = errors.New("cameras: no session")

// Holder returns the request's session id: the lease holder.
func Holder(r *http.Request) (string, error) {
	id, _ := r.Context().Value(sessionKey{}).(string)
	if id == "" {
		return "", errNoSession
	}
	return id, nil
}

// Touch records that the request's page is open.
func (s *Sessions) Touch(r *http.Request) {
	if id, err := Holder(r); err == nil {
		s.mu.Lock()
		s.seen[id] = s.now()
		s.mu.Unlock()
	}
}

// Active returns how many pages asked for the status within activeWindow,
// forgetting the others, so the map never holds more than the open pages.
func (s *Sessions) Active() int {
	cutoff := s.now().Add(-activeWindow)
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.seen {
		if t.Before(cutoff) {
			delete(s.seen, id)
		}
	}
	return len(s.seen)
}

// tracked returns how many sessions are remembered (for the long-run test).
func (s *Sessions) tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}
