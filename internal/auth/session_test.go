package auth

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testKeys(b byte) Keys {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return Keys{Current: k}
}

func issue(t *testing.T, s *Sessions) (Session, string) {
	t.Helper()
	sess, err := s.Issue("alice", "local", time.Time{}, 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return sess, s.Encode(sess)
}

// TestSessionsSurviveRestart: a new Sessions on the same key (a restarted
// node) accepts cookies of the old one; a different key does not; the
// previous key is honoured during rotation.
func TestSessionsSurviveRestart(t *testing.T) {
	clk := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	_, cookie := issue(t, NewSessions(testKeys(1), clk.now))
	if _, err := NewSessions(testKeys(1), clk.now).Decode(cookie, time.Hour); err != nil {
		t.Errorf("same key after restart: %v", err)
	}
	if _, err := NewSessions(testKeys(2), clk.now).Decode(cookie, time.Hour); !errors.Is(err, ErrSessionInvalid) {
		t.Errorf("other key: %v", err)
	}
	rotated := Keys{Current: testKeys(2).Current, Previous: testKeys(1).Current}
	if _, err := NewSessions(rotated, clk.now).Decode(cookie, time.Hour); err != nil {
		t.Errorf("previous key during rotation: %v", err)
	}
}

func TestRevocationsPersist(t *testing.T) {
	ctx := context.Background()
	clk := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "sessions.db")
	s := NewSessions(testKeys(1), clk.now)
	// A revocation made before Persist is written through by it.
	early, earlyCookie := issue(t, s)
	if err := s.Revoke(ctx, early); err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(ctx, path); err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(ctx, path); err == nil {
		t.Error("second Persist accepted")
	}
	out, outCookie := issue(t, s)
	_, keptCookie := issue(t, s)
	if err := s.Revoke(ctx, out); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(outCookie, time.Hour); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("revoked session: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: the same key, the same file.
	s2 := NewSessions(testKeys(1), clk.now)
	if err := s2.Persist(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for name, c := range map[string]string{"logged out": outCookie, "revoked before Persist": earlyCookie} {
		if _, err := s2.Decode(c, time.Hour); !errors.Is(err, ErrSessionExpired) {
			t.Errorf("%s cookie after restart: %v", name, err)
		}
	}
	if _, err := s2.Decode(keptCookie, time.Hour); err != nil {
		t.Errorf("live cookie after restart: %v", err)
	}
	if len(s2.revoked) != 2 {
		t.Errorf("loaded %d revocations, want 2", len(s2.revoked))
	}

	// Expired revocations are dropped at the next start.
	clk.add(13 * time.Hour)
	s3 := NewSessions(testKeys(1), clk.now)
	if err := s3.Persist(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if len(s3.revoked) != 0 {
		t.Errorf("expired revocations kept: %d", len(s3.revoked))
	}
}

// TestRevocationOverflow: beyond the memory bound revocations stay in the
// file and are still honoured.
func TestRevocationOverflow(t *testing.T) {
	ctx := context.Background()
	old := maxRevoked
	maxRevoked = 2
	defer func() { maxRevoked = old }()
	clk := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "sessions.db")
	s := NewSessions(testKeys(1), clk.now)
	if err := s.Persist(ctx, path); err != nil {
		t.Fatal(err)
	}
	var cookies []string
	for range 4 {
		sess, c := issue(t, s)
		if err := s.Revoke(ctx, sess); err != nil {
			t.Fatal(err)
		}
		cookies = append(cookies, c)
	}
	_, live := issue(t, s)
	for i, c := range cookies {
		if _, err := s.Decode(c, time.Hour); !errors.Is(err, ErrSessionExpired) {
			t.Errorf("revoked cookie %d: %v", i, err)
		}
	}
	if _, err := s.Decode(live, time.Hour); err != nil {
		t.Errorf("live cookie: %v", err)
	}
	s.Close()
	s2 := NewSessions(testKeys(1), clk.now)
	if err := s2.Persist(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for i, c := range cookies {
		if _, err := s2.Decode(c, time.Hour); !errors.Is(err, ErrSessionExpired) {
			t.Errorf("revoked cookie %d after restart: %v", i, err)
		}
	}
	if _, err := s2.Decode(live, time.Hour); err != nil {
		t.Errorf("live cookie after restart: %v", err)
	}
}
