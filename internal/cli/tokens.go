package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zalando/go-keyring"
)

// keyringService names the CLI's entries in the OS keyring; the account of
// an entry is the context name.
const keyringService = "svc"

// keyringTimeout bounds one keyring call: a Secret Service that waits for
// an unlock prompt nobody answers must not hang the CLI.
const keyringTimeout = 5 * time.Second

// Keyring is the OS keyring as the token store uses it; go-keyring (Secret
// Service over D-Bus on Linux, Keychain on macOS, Credential Manager on
// Windows) by default, replaceable in tests.
type Keyring interface {
	Get(service, user string) (string, error)
	Set(service, user, secret string) error
	Delete(service, user string) error
}

// osKeyring is go-keyring.
type osKeyring struct{}

func (osKeyring) Get(service, user string) (string, error) { return keyring.Get(service, user) }
func (osKeyring) Set(service, user, secret string) error   { return keyring.Set(service, user, secret) }
func (osKeyring) Delete(service, user string) error        { return keyring.Delete(service, user) }

// errKeyringNotFound is returned by a Keyring for an absent entry.
var errKeyringNotFound = keyring.ErrNotFound

// tokenStore keeps the API token of each context: in the OS keyring when
// one is available, else in the client configuration file (written with
// mode 0600). SERVICE_KEYRING=file skips the keyring. When the keyring
// fails the token goes to the file and the CLI says so once on stderr.
type tokenStore struct {
	a       *app
	mode    string
	kr      Keyring
	usedKey bool // the last set stored the token in the keyring
}

func (a *app) tokens(_ *ClientConfig) *tokenStore {
	kr := a.keyring
	if kr == nil {
		kr = osKeyring{}
	}
	return &tokenStore{a: a, mode: strings.ToLower(strings.TrimSpace(a.env("SERVICE_KEYRING"))), kr: kr}
}

func (s *tokenStore) fileOnly() bool { return s.mode == "file" }

// backend names where the last set put the token, for messages.
func (s *tokenStore) backend() string {
	if s.usedKey {
		return "the OS keyring"
	}
	return "the config file"
}

// fallback says once per invocation that the keyring is not used.
func (s *tokenStore) fallback(err error) {
	if s.a.keyringWarned {
		return
	}
	s.a.keyringWarned = true
	fmt.Fprintf(s.a.stderr, "warning: OS keyring unavailable (%v); tokens are kept in the config file (mode 0600); set SERVICE_KEYRING=file to skip the keyring\n", err)
}

// withTimeout runs one keyring call with keyringTimeout.
func withTimeout[T any](f func() (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		v, err := f()
		ch <- res{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(keyringTimeout):
		var zero T
		return zero, fmt.Errorf("no answer within %s", keyringTimeout)
	}
}

func (s *tokenStore) get(c *Context) (string, error) {
	if c.Token != "" || s.fileOnly() {
		return c.Token, nil
	}
	tok, err := withTimeout(func() (string, error) { return s.kr.Get(keyringService, c.Name) })
	switch {
	case err == nil:
		return tok, nil
	case errors.Is(err, errKeyringNotFound):
		return "", nil
	default:
		// No token: the request goes unauthenticated and the server's 401
		// says how to log in.
		s.fallback(err)
		return "", nil
	}
}

// set records the token; the caller saves the configuration.
func (s *tokenStore) set(c *Context, tok string) error {
	s.usedKey = false
	if !s.fileOnly() {
		_, err := withTimeout(func() (struct{}, error) { return struct{}{}, s.kr.Set(keyringService, c.Name, tok) })
		if err == nil {
			s.usedKey = true
			c.Token = ""
			return nil
		}
		s.fallback(err)
	}
	c.Token = tok
	return nil
}

func (s *tokenStore) del(c *Context) error {
	c.Token = ""
	if s.fileOnly() {
		return nil
	}
	_, err := withTimeout(func() (struct{}, error) { return struct{}{}, s.kr.Delete(keyringService, c.Name) })
	if err != nil && !errors.Is(err, errKeyringNotFound) {
		s.fallback(err)
	}
	return nil
}
