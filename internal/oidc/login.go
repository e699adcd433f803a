package oidc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/oauth2"
)

// LoginTTL is how long a browser login may take from start to callback.
const LoginTTL = 10 * time.Minute

// LoginState is what the server keeps between /start and /callback: the
// state, nonce and PKCE verifier, the redirect URI sent to the provider and
// where to send the browser afterwards. It travels in a short-lived cookie
// encrypted and authenticated with a key derived from the encryption key,
// so every replica sharing that key can finish the login.
type LoginState struct {
	Provider    string `json:"p"`
	State       string `json:"s"`
	Nonce       string `json:"n"`
	Verifier    string `json:"v"`
	RedirectURI string `json:"r"`
	Return      string `json:"t"`
	Expires     int64  `json:"e"`
}

// NewLoginState draws a fresh state, nonce and PKCE verifier.
func NewLoginState(provider, redirectURI, ret string, now time.Time) (LoginState, error) {
	st, err := random()
	if err != nil {
		return LoginState{}, err
	}
	nonce, err := random()
	if err != nil {
		return LoginState{}, err
	}
	return LoginState{Provider: provider, State: st, Nonce: nonce, Verifier: oauth2.GenerateVerifier(),
		RedirectURI: redirectURI, Return: ret, Expires: now.Add(LoginTTL).Unix()}, nil
}

func random() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("oidc: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ErrLoginState answers a missing, altered or expired login state.
var ErrLoginState = errors.New("oidc: login state missing, invalid or expired")

// StateCodec seals login states (AES-256-GCM).
type StateCodec struct {
	cur, prev cipher.AEAD
	now       func() time.Time
}

const stateAD = "service oidc login state v1"

// NewStateCodec seals with key (32 bytes) and also opens states sealed with
// prev (nil: none), for key rotation.
func NewStateCodec(key, prev []byte, now func() time.Time) (*StateCodec, error) {
	if now == nil {
		now = time.Now
	}
	c := &StateCodec{now: now}
	var err error
	if c.cur, err = aead(key); err != nil {
		return nil, err
	}
	if prev != nil {
		if c.prev, err = aead(prev); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func aead(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, errors.New("oidc: state key must be 32 bytes")
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Encode seals a login state into a cookie value.
func (c *StateCodec) Encode(ls LoginState) (string, error) {
	pt, err := json.Marshal(ls)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, c.cur.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("oidc: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(c.cur.Seal(nonce, nonce, pt, []byte(stateAD))), nil
}

// Decode opens a cookie value and checks its expiry.
func (c *StateCodec) Decode(v string) (LoginState, error) {
	if v == "" || len(v) > 4096 {
		return LoginState{}, ErrLoginState
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) < c.cur.NonceSize()+c.cur.Overhead() {
		return LoginState{}, ErrLoginState
	}
	var pt []byte
	for _, a := range []cipher.AEAD{c.cur, c.prev} {
		if a == nil {
			continue
		}
		n := a.NonceSize()
		if pt, err = a.Open(nil, b[:n], b[n:], []byte(stateAD)); err == nil {
			break
		}
	}
	if err != nil {
		return LoginState{}, ErrLoginState
	}
	var ls LoginState
	if json.Unmarshal(pt, &ls) != nil || ls.State == "" || ls.Verifier == "" || ls.Nonce == "" {
		return LoginState{}, ErrLoginState
	}
	if c.now().Unix() >= ls.Expires {
		return LoginState{}, ErrLoginState
	}
	return ls, nil
}
