// Package auth provides local authentication (passwords, sessions, API
// tokens, lockouts, encryption keys) and authorization (roles, bindings,
// scopes) for the REST API.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters required by the spec (memory 19 MiB, time 2, parallelism 1).
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16

	// MinPasswordLen and MaxPasswordLen bound passwords (bytes; the minimum is
	// counted in characters).
	MinPasswordLen = 8
	MaxPasswordLen = 1024
)

// ErrPasswordLength refuses a password outside 8 characters to 1024 bytes.
var ErrPasswordLength = errors.New("password must be 8 to 1024 bytes long and at least 8 characters")

// ErrBadHash reports a stored hash this package cannot read.
var ErrBadHash = errors.New("unreadable password hash")

// CheckPasswordPolicy validates a new password.
func CheckPasswordPolicy(pw string) error {
	if len(pw) > MaxPasswordLen || len([]rune(pw)) < MinPasswordLen {
		return ErrPasswordLength
	}
	return nil
}

// Hasher hashes and verifies passwords with Argon2id. Hashing costs 19 MiB of
// memory, so concurrency is bounded by a semaphore.
type Hasher struct {
	sem   chan struct{}
	dummy string
}

// NewHasher returns a Hasher running at most concurrency hashes at once.
func NewHasher(concurrency int) *Hasher {
	if concurrency < 1 {
		concurrency = 1
	}
	h := &Hasher{sem: make(chan struct{}, concurrency)}
	// A fixed hash verified for unknown users so that they cost as much as
	// known ones and timing does not reveal which usernames exist.
	h.dummy = encodeHash(make([]byte, argonSaltLen), argon2.IDKey([]byte("dummy"), make([]byte, argonSaltLen), argonTime, argonMemoryKiB, argonThreads, argonKeyLen))
	return h
}

func (h *Hasher) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting to hash a password: %w", ctx.Err())
	}
}

func (h *Hasher) release() { <-h.sem }

// Hash returns the PHC-style Argon2id hash of pw.
func (h *Hasher) Hash(ctx context.Context, pw string) (string, error) {
	if err := CheckPasswordPolicy(pw); err != nil {
		return "", err
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return encodeHash(salt, key), nil
}

// Verify reports whether pw matches encoded. An empty encoded (unknown user)
// is checked against a dummy hash and always fails.
func (h *Hasher) Verify(ctx context.Context, pw, encoded string) (bool, error) {
	known := encoded != ""
	if !known {
		encoded = h.dummy
	}
	if len(pw) > MaxPasswordLen {
		pw = pw[:MaxPasswordLen]
		known = false
	}
	salt, want, m, t, p, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer h.release()
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	ok := subtle.ConstantTimeCompare(got, want) == 1
	return ok && known, nil
}

func encodeHash(salt, key []byte) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

func decodeHash(s string) (salt, key []byte, m, t uint32, p uint8, err error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return nil, nil, 0, 0, 0, ErrBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return nil, nil, 0, 0, 0, ErrBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return nil, nil, 0, 0, 0, ErrBadHash
	}
	// Refuse absurd parameters from a tampered store rather than exhaust memory.
	if m == 0 || m > 256*1024 || t == 0 || t > 16 || p == 0 {
		return nil, nil, 0, 0, 0, ErrBadHash
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(parts[4]); err != nil {
		return nil, nil, 0, 0, 0, ErrBadHash
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) < 16 || len(key) > 64 {
		return nil, nil, 0, 0, 0, ErrBadHash
	}
	return salt, key, m, t, p, nil
}

// GeneratePassword returns a random password of 24 URL-safe characters.
func GeneratePassword() (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
