package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/sqlitedb"
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
	// Bindings are the fingerprints of the bindings that gave Grants at an
	// OIDC login (Binding.Fingerprint).
	Bindings []string `json:"b,omitempty"`
	// Subject is the OIDC subject of an OIDC login.
	Subject  string `json:"sub,omitempty"`
	IssuedAt int64  `json:"iat"`
	Expires  int64  `json:"exp"`
	Seen     int64  `json:"seen"`
}

// Errors of session parsing; callers answer them all alike with 401.
var (
	ErrSessionInvalid = errors.New("invalid session")
	ErrSessionExpired = errors.New("session expired")
)

// Sessions issues and verifies HMAC-signed session cookies. No session table
// is needed, so every replica sharing the encryption key accepts a cookie
// (the MAC key is derived from the encryption key, so cookies also survive
// restarts). Logout revokes one session id: kept in memory and, after
// Persist, in a SQLite file so that a logged-out cookie stays dead across
// restarts. A password change or reset revokes every session of the user
// through sessionsValidAfter (in the store, so on every replica).
type Sessions struct {
	keys  Keys
	clock Clock

	mu      sync.Mutex
	revoked map[string]int64 // revocationKey(session id) -> expiry
	// db holds revocations persistently (nil: memory only); overflow is
	// set when some revocations live only there, so lookups consult it.
	db       *sql.DB
	overflow bool
	writes   int
}

// maxRevoked bounds the logout revocation list; entries leave at expiry.
var maxRevoked = 100000

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
	if s.isRevoked(sess.ID) {
		return Session{}, ErrSessionExpired
	}
	return sess, nil
}

func (s *Sessions) isRevoked(id string) bool {
	key := revocationKey(id)
	s.mu.Lock()
	_, revoked := s.revoked[key]
	db, overflow := s.db, s.overflow
	s.mu.Unlock()
	if revoked || db == nil || !overflow {
		return revoked
	}
	// More revocations than fit in memory: ask the file.
	var n int
	err := db.QueryRow(`SELECT count(*) FROM revoked_sessions WHERE id = ?`, key).Scan(&n)
	// When the file cannot answer, refuse rather than accept a revoked cookie.
	return err != nil || n > 0
}

// ValidAfter reports whether the session was issued after validAfter.
func (sess Session) ValidAfter(validAfter time.Time) bool {
	return validAfter.IsZero() || sess.IssuedAt > validAfter.Unix()
}

// Revoke refuses the session until its expiry. With Persist, the
// revocation is written to the file before Revoke returns.
func (s *Sessions) Revoke(ctx context.Context, sess Session) error {
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
	key := revocationKey(sess.ID)
	if len(s.revoked) < maxRevoked {
		s.revoked[key] = sess.Expires
	} else if s.db != nil {
		s.overflow = true
	}
	if s.db == nil {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO revoked_sessions (id, exp) VALUES (?, ?)`, key, sess.Expires); err != nil {
		return fmt.Errorf("persist session revocation: %w", err)
	}
	if s.writes++; s.writes%1000 == 0 {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM revoked_sessions WHERE exp <= ?`, now); err != nil {
			return fmt.Errorf("prune session revocations: %w", err)
		}
	}
	return nil
}

// revocationsDBOptions: a revocation is on disk when Revoke returns
// (synchronous FULL), so a logged-out session stays out after a crash.
var revocationsDBOptions = sqlitedb.Options{BusyTimeout: 5 * time.Second, WAL: true, Synchronous: sqlitedb.SyncFull, ImmediateTx: true}

// Persist keeps revocations in the SQLite file at path (created when
// missing): those not yet expired are loaded, expired ones are dropped, and
// every later Revoke is written through. Only a hash of each session id is
// stored. Close releases the file.
func (s *Sessions) Persist(ctx context.Context, path string) error {
	db, err := sqlitedb.Open(path, revocationsDBOptions)
	if err != nil {
		return fmt.Errorf("open session revocations: %w", err)
	}
	db.SetMaxOpenConns(1)
	fail := func(err error) error {
		db.Close()
		return fmt.Errorf("session revocations %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS revoked_sessions (id TEXT PRIMARY KEY, exp INTEGER NOT NULL)`); err != nil {
		return fail(err)
	}
	now := s.clock().Unix()
	if _, err := db.ExecContext(ctx, `DELETE FROM revoked_sessions WHERE exp <= ?`, now); err != nil {
		return fail(err)
	}
	rows, err := db.QueryContext(ctx, `SELECT id, exp FROM revoked_sessions`)
	if err != nil {
		return fail(err)
	}
	loaded := map[string]int64{}
	overflow := false
	for rows.Next() {
		var id string
		var exp int64
		if err := rows.Scan(&id, &exp); err != nil {
			rows.Close()
			return fail(err)
		}
		if len(loaded) >= maxRevoked {
			overflow = true
			continue
		}
		loaded[id] = exp
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil {
		db.Close()
		return errors.New("session revocations are already persisted")
	}
	s.db = db
	for k, exp := range loaded {
		if len(s.revoked) >= maxRevoked {
			overflow = true
			break
		}
		s.revoked[k] = exp
	}
	s.overflow = overflow
	// Revocations made before Persist are written through now.
	for k, exp := range s.revoked {
		if _, ok := loaded[k]; !ok && exp > now {
			if _, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO revoked_sessions (id, exp) VALUES (?, ?)`, k, exp); err != nil {
				return fmt.Errorf("persist session revocation: %w", err)
			}
		}
	}
	return nil
}

// Close releases the revocation file.
func (s *Sessions) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}

func revocationKey(id string) string {
	sum := sha256.Sum256([]byte("session/" + id))
	return hex.EncodeToString(sum[:])
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
