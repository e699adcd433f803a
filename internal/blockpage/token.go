package blockpage

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/atomicfile"
)

const (
	// tokenLifetime: long enough to type a reason, short enough that a
	// token copied out of a page is soon worthless.
	tokenLifetime = 30 * time.Minute
	tokenVersion  = 1
	tokenKeyFile  = "form.key"
	// payload: version, expiry (unix seconds), 16-byte nonce
	tokenPayloadLen = 1 + 8 + 16
	// maxUsedTokens bounds the replay memory; tokens live 30 minutes and
	// page views are rate limited, so this is far above honest use.
	maxUsedTokens = 100000
)

var (
	errTokenMissing  = errors.New("the form carries no token")
	errTokenInvalid  = errors.New("the form's token is not valid for this page and address")
	errTokenExpired  = errors.New("the form has expired")
	errTokenReplayed = errors.New("this form was already sent")
	errTokenBusy     = errors.New("too many forms are being sent right now")
)

// tokens issues and checks the signed token of the unblock form. A token
// binds the blocked name, the Host the page was served for and the
// browser's address, so a page fetched by someone else (another address,
// another site posting cross-origin) yields no token that works here.
type tokens struct {
	key []byte

	mu   sync.Mutex
	used map[[16]byte]time.Time // nonce -> expiry of tokens already sent
}

// loadTokenKey reads dir/form.key, or writes a new random one, so forms
// issued before a restart still work; dir "" keeps a per-process key.
func loadTokenKey(dir string) ([]byte, error) {
	key := make([]byte, 32)
	if dir == "" {
		_, err := rand.Read(key)
		return key, err
	}
	path := filepath.Join(dir, tokenKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(b) == 32:
		return b, nil
	case err == nil:
		return nil, fmt.Errorf("block page form key %s is %d bytes, want 32: delete it to generate a new one", path, len(b))
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("block page form key: %w", err)
	}
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("block page state directory: %w", err)
	}
	if err := atomicfile.Write(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("block page form key: %w", err)
	}
	return key, nil
}

func newTokens(key []byte) *tokens {
	return &tokens{key: key, used: map[[16]byte]time.Time{}}
}

// issue returns a token for a form shown now.
func (t *tokens) issue(domain, host string, client netip.Addr, now time.Time) string {
	p := make([]byte, tokenPayloadLen)
	p[0] = tokenVersion
	binary.BigEndian.PutUint64(p[1:9], uint64(now.Add(tokenLifetime).Unix()))
	if _, err := rand.Read(p[9:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(p) + "." + base64.RawURLEncoding.EncodeToString(t.mac(p, domain, host, client))
}

func (t *tokens) mac(payload []byte, domain, host string, client netip.Addr) []byte {
	h := hmac.New(sha256.New, t.key)
	h.Write(payload)
	// NUL separators: no name, host or address contains one, so fields
	// cannot be shifted into each other.
	for _, s := range []string{domain, host, client.Unmap().String()} {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	return h.Sum(nil)
}

// decodeToken splits a token into its payload and MAC; it checks only the
// shape, not the signature.
func decodeToken(tok string) (payload, mac []byte, err error) {
	if tok == "" {
		return nil, nil, errTokenMissing
	}
	if len(tok) > 100 {
		return nil, nil, errTokenInvalid
	}
	i := strings.IndexByte(tok, '.')
	if i < 0 {
		return nil, nil, errTokenInvalid
	}
	enc := base64.RawURLEncoding.Strict() // one spelling per token
	payload, err1 := enc.DecodeString(tok[:i])
	mac, err2 := enc.DecodeString(tok[i+1:])
	if err1 != nil || err2 != nil || len(payload) != tokenPayloadLen || payload[0] != tokenVersion || len(mac) != sha256.Size {
		return nil, nil, errTokenInvalid
	}
	return payload, mac, nil
}

// check verifies tok for this page and address (constant-time MAC
// compare), then its expiry; it does not spend it.
func (t *tokens) check(tok, domain, host string, client netip.Addr, now time.Time) ([16]byte, error) {
	var nonce [16]byte
	payload, mac, err := decodeToken(tok)
	if err != nil {
		return nonce, err
	}
	if !hmac.Equal(mac, t.mac(payload, domain, host, client)) {
		return nonce, errTokenInvalid
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(payload[1:9])), 0)
	if !now.Before(exp) {
		return nonce, errTokenExpired
	}
	if exp.Sub(now) > tokenLifetime+time.Minute {
		return nonce, errTokenInvalid // issued with another clock or key
	}
	copy(nonce[:], payload[9:])
	return nonce, nil
}

// spend marks a checked token used until it expires; a second spend of
// the same token is a replay.
func (t *tokens) spend(nonce [16]byte, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if exp, ok := t.used[nonce]; ok && now.Before(exp) {
		return errTokenReplayed
	}
	if len(t.used) >= maxUsedTokens {
		for n, exp := range t.used {
			if !now.Before(exp) {
				delete(t.used, n)
			}
		}
		if len(t.used) >= maxUsedTokens {
			// Forgetting a live nonce would allow its replay: refuse.
			return errTokenBusy
		}
	}
	t.used[nonce] = now.Add(tokenLifetime + time.Minute)
	return nil
}
