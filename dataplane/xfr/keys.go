// Package xfr serves zone transfers (AXFR, RFC 5936; IXFR, RFC 1995) of the
// primary zones of an authority table over TCP and DoT (RFC 9103), signs
// and verifies them with TSIG (RFC 8945), keeps the bounded per-zone IXFR
// journal and sends NOTIFY (RFC 1996) to secondaries.
package xfr

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/miekg/dns"
)

// KeySpec is one tsigKeys setting item.
type KeySpec struct {
	Name       string // domain name of the key
	Algorithm  string // hmac-sha256 or hmac-sha512
	SecretFile string // file holding the base64 secret
}

// Key is a loaded TSIG key. Secret is base64, the form miekg/dns takes.
type Key struct {
	Name      string // canonical: lower case, trailing dot
	Algorithm string // dns.HmacSHA256 or dns.HmacSHA512
	Secret    string
}

// Keyring holds keys by canonical name.
type Keyring map[string]Key

// Lookup finds a key by name in any case, with or without the final dot.
func (r Keyring) Lookup(name string) (Key, bool) {
	k, ok := r[dns.CanonicalName(name)]
	return k, ok
}

var algorithms = map[string]string{"hmac-sha256": dns.HmacSHA256, "hmac-sha512": dns.HmacSHA512}

// LoadKeys reads every key's secret file. A secret file holds the base64
// secret alone (what `tsig-keygen`, `keymgr -t` or `openssl rand -base64
// 32` print), surrounding white space ignored; a BIND key clause
// (`secret "...";`) is read too.
func LoadKeys(specs []KeySpec) (Keyring, error) {
	kr := make(Keyring, len(specs))
	for _, s := range specs {
		alg, ok := algorithms[strings.ToLower(s.Algorithm)]
		if !ok {
			return nil, fmt.Errorf("tsigKeys %s: algorithm %q: want hmac-sha256 or hmac-sha512", s.Name, s.Algorithm)
		}
		b, err := os.ReadFile(s.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("tsigKeys %s: secretFile: %w", s.Name, err)
		}
		secret, err := parseSecret(string(b))
		if err != nil {
			return nil, fmt.Errorf("tsigKeys %s: secretFile %s: %w", s.Name, s.SecretFile, err)
		}
		name := dns.CanonicalName(s.Name)
		kr[name] = Key{Name: name, Algorithm: alg, Secret: secret}
	}
	return kr, nil
}

// parseSecret returns the base64 secret of a file's text.
func parseSecret(text string) (string, error) {
	s := strings.TrimSpace(text)
	if i := strings.Index(s, "secret"); i >= 0 && strings.Contains(s, "\"") {
		rest := s[i+len("secret"):]
		a := strings.IndexByte(rest, '"')
		b := strings.IndexByte(rest[a+1:], '"')
		if a < 0 || b < 0 {
			return "", errors.New("a key clause without a quoted secret")
		}
		s = rest[a+1 : a+1+b]
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", errors.New("the secret is not base64: write the base64 secret alone, e.g. the output of `openssl rand -base64 32`")
	}
	if len(raw) < 16 {
		return "", fmt.Errorf("the secret is %d bytes: use at least 16 (RFC 8945 6: as long as the hash output is best)", len(raw))
	}
	return s, nil
}
