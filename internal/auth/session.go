package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// CookieBaseName is the session cookie name without the __Host- prefix.
const CookieBaseName = "service_session"

// CookieName returns the session cookie name: browsers only honour the
// __Host- prefix on Secure cookies with Path=/.
func CookieName(secure bool, path string) string {
	if secure && path == "/" {
		return "__Host-" + CookieBaseName
	}
	return CookieBaseName
}

// Session is the content of a signed session cookie.
type Session struct {
	ID       string   `json:"sid"`
	User     string   `json:"u"`
	Provider string   `json:"p,omitempty"`
	Grants   []string `json:"g,omitempty"` // frozen grants of OIDC logins
	IssuedAt int64    `json:"iat"`
	Expires  int64    `json:"exp"`
	Seen     int64    `json:"seen"`
}

// Errors of session parsing; callers answer them all alike with 401.
var (
	ErrSessionInvalid = errors.New("invalid session")
	ErrSessionExpired = errors.New("session expired")
)

// Sessions issues and verifies HMAC-signed session cookies. No session table
// is needed, so every replica sharing the encryption key accepts a cookie;
// logout adds the session id to a bounded in-memory revocation list, and a
// password change revokes every session through sessionsValidAfter.
type Sessions struct {
	keys  Keys
	clock Clock

	mu      sync.Mutex
	revoked map[string]int64 // session id -> expiry
}

// maxRevoked bounds the logout revocation list; entries leave at expiry.
const maxRevoked = 100000

// NewSessions returns a session codec keyed by keys.
func NewSessions(keys Keys, clock Clock) *Sessions {
	if clock == nil {
		clock = time.Now
	}
	return &Sessions{keys: keys, clock: clock, revoked: map[string]int64{}}
}

// Issue creates a session for user, issued no earlier than one second after
// validAfter so that it is not born revoked.
func (s *Sessions) Issue(user, provider string, validAfter time.Time, lifetime time.Duration) (Session, error) {
	now := s.clock()
	iat := now.Unix()
	if !validAfter.IsZero() && iat <= validAfter.Unix() {
		iat = validAfter.Unix() + 1
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return Session{}, fmt.Errorf("session id: %w", err)
	}
	return Session{
		ID: base64.RawURLEncoding.EncodeToString(id), User: user, Provider: provider,
		IssuedAt: iat, Expires: now.Add(lifetime).Unix(), Seen: now.Unix(),
	}, nil
}

// Encode signs a session into a cookie value.
func (s *Sessions) Encode(sess Session) string {
	b, _ := json.Marshal(sess)
	p := base64.RawURLEncoding.EncodeToString(b)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(s.keys.Derive("session"), p))
}

// Decode verifies a cookie value, its absolute and idle expiry and revocation.
func (s *Sessions) Decode(v string, idle time.Duration) (Session, error) {
	p, sig, ok := strings.Cut(v, ".")
	if !ok || len(v) > 8192 {
		return Session{}, ErrSessionInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return Session{}, ErrSessionInvalid
	}
	valid := hmac.Equal(got, mac(s.keys.Derive("session"), p))
	if !valid {
		if prev := s.keys.DerivePrevious("session"); prev != nil {
			valid = hmac.Equal(got, mac(prev, p))
		}
	}
	if !valid {
		return Session{}, ErrSessionInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return Session{}, ErrSessionInvalid
	}
	var sess Session
	if err := json.Unmarshal(b, &sess); err != nil || sess.ID == "" || sess.User == "" {
		return Session{}, ErrSessionInvalid
	}
	now := s.clock().Unix()
	if now >= sess.Expires || (idle > 0 && now-sess.Seen >= int64(idle/time.Second)) {
		return Session{}, ErrSessionExpired
	}
	s.mu.Lock()
	_, revoked := s.revoked[sess.ID]
	s.mu.Unlock()
	if revoked {
		return Session{}, ErrSessionExpired
	}
	return sess, nil
}

// ValidAfter reports whether the session was issued after validAfter.
func (sess Session) ValidAfter(validAfter time.Time) bool {
	return validAfter.IsZero() || sess.IssuedAt > validAfter.Unix()
}

// Revoke refuses the session until its expiry.
func (s *Sessions) Revoke(sess Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock().Unix()
	if len(s.revoked) >= maxRevoked {
		for id, exp := range s.revoked {
			if exp <= now {
				delete(s.revoked, id)
			}
		}
	}
	if len(s.revoked) < maxRevoked {
		s.revoked[sess.ID] = sess.Expires
	}
}

// CSRF returns the CSRF token bound to a session.
func (s *Sessions) CSRF(sess Session) string {
	return base64.RawURLEncoding.EncodeToString(mac(s.keys.Derive("csrf"), sess.ID))
}

// CheckCSRF compares a presented CSRF header in constant time.
func (s *Sessions) CheckCSRF(sess Session, presented string) bool {
	return presented != "" && hmac.Equal([]byte(presented), []byte(s.CSRF(sess)))
}

func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
