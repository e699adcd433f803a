package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Keys holds the encryption key and the previous one (during rotation).
type Keys struct {
	Current  []byte
	Previous []byte // may be nil
}

// ErrNoKey is returned when no key is configured and none may be generated.
var ErrNoKey = errors.New("no encryption key configured")

// Env reads an environment variable; os.Getenv in production, a map in tests.
type Env func(string) string

// LoadKeys resolves the encryption keys: SERVICE_ENCRYPTION_KEY (or _FILE) and
// SERVICE_ENCRYPTION_KEY_PREVIOUS (or _FILE), base64 or hex. Without a key,
// generate allows creating one in <dataDir>/keys/encryption.key; otherwise
// ErrNoKey (the Kubernetes driver refuses to start without a key).
func LoadKeys(env Env, dataDir string, generate bool) (Keys, error) {
	cur, err := keyFromEnv(env, "SERVICE_ENCRYPTION_KEY")
	if err != nil {
		return Keys{}, err
	}
	prev, err := keyFromEnv(env, "SERVICE_ENCRYPTION_KEY_PREVIOUS")
	if err != nil {
		return Keys{}, err
	}
	if cur == nil {
		if !generate || dataDir == "" {
			return Keys{}, ErrNoKey
		}
		if cur, err = keyFile(filepath.Join(dataDir, "keys", "encryption.key")); err != nil {
			return Keys{}, err
		}
	}
	return Keys{Current: cur, Previous: prev}, nil
}

func keyFromEnv(env Env, name string) ([]byte, error) {
	v := strings.TrimSpace(env(name))
	if f := env(name + "_FILE"); v == "" && f != "" {
		b, err := readSmallFile(f, 4096)
		if err != nil {
			return nil, fmt.Errorf("%s_FILE: %w", name, err)
		}
		v = strings.TrimSpace(string(b))
	}
	if v == "" {
		return nil, nil
	}
	k, err := DecodeKey(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return k, nil
}

// DecodeKey accepts a key of at least 32 bytes in hex or base64 (std or URL).
func DecodeKey(v string) ([]byte, error) {
	if b, err := hex.DecodeString(v); err == nil && len(b) >= 32 {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(v); err == nil && len(b) >= 32 {
			return b, nil
		}
	}
	return nil, errors.New("key must be at least 32 bytes, hex or base64 encoded")
}

// keyFile reads the generated key or creates it. Concurrent first starts
// agree: only one O_EXCL create wins and everyone re-reads the file.
func keyFile(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("key directory: %w", err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("key directory: %w", err)
	}
	for attempt := 0; attempt < 50; attempt++ {
		if b, err := readSmallFile(path, 4096); err == nil {
			if k, err := DecodeKey(strings.TrimSpace(string(b))); err == nil {
				return k, nil
			}
			// A racing creator may not have finished writing; retry briefly.
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read key: %w", err)
		}
		if attempt == 0 {
			if err := createKeyFile(path); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, err
			}
			continue
		}
		sleepBriefly()
	}
	return nil, fmt.Errorf("key file %s stays unreadable", path)
}

func createKeyFile(path string) error {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	// Write to a temp file then link it into place with O_EXCL semantics
	// (os.Link fails when the target exists), so readers never see half a key.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".encryption.key.*")
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("create key: %w", err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("write key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		// Filesystems without hard links: fall back to an exclusive create.
		f, ferr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if ferr != nil {
			return ferr
		}
		defer f.Close()
		if _, err := f.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
			return fmt.Errorf("write key: %w", err)
		}
	}
	return nil
}

func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, limit+1)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return nil, err
	}
	if int64(n) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return buf[:n], nil
}

// Derive returns a subkey of the current key for one purpose, so that a
// cookie MAC key never doubles as, say, the internal token.
func (k Keys) Derive(purpose string) []byte {
	return derive(k.Current, purpose)
}

// DerivePrevious derives from the previous key (nil without one).
func (k Keys) DerivePrevious(purpose string) []byte {
	if k.Previous == nil {
		return nil
	}
	return derive(k.Previous, purpose)
}

func derive(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("service/" + purpose))
	return m.Sum(nil)
}
