package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// TokenPrefix starts every API token.
const TokenPrefix = "svc_"

const (
	tokenIDLen     = 12
	tokenSecretLen = 43 // base64url of 32 bytes, unpadded
	tokenIDAlpha   = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// ErrMalformedToken is returned for a string that is not in token wire form.
var ErrMalformedToken = errors.New("malformed token")

// NewToken returns a fresh token in wire form svc_<id>_<secret> and its id.
func NewToken() (token, id string, err error) {
	idb := make([]byte, tokenIDLen)
	if _, err := rand.Read(idb); err != nil {
		return "", "", fmt.Errorf("token id: %w", err)
	}
	for i := range idb {
		// 256 is not a multiple of 36; the bias is irrelevant for an identifier.
		idb[i] = tokenIDAlpha[int(idb[i])%len(tokenIDAlpha)]
	}
	sec := make([]byte, 32)
	if _, err := rand.Read(sec); err != nil {
		return "", "", fmt.Errorf("token secret: %w", err)
	}
	id = string(idb)
	return TokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(sec), id, nil
}

// ParseToken checks the wire form and returns the token id.
func ParseToken(tok string) (id string, err error) {
	if len(tok) != len(TokenPrefix)+tokenIDLen+1+tokenSecretLen || tok[:len(TokenPrefix)] != TokenPrefix {
		return "", ErrMalformedToken
	}
	id = tok[len(TokenPrefix) : len(TokenPrefix)+tokenIDLen]
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return "", ErrMalformedToken
		}
	}
	if tok[len(TokenPrefix)+tokenIDLen] != '_' {
		return "", ErrMalformedToken
	}
	sec := tok[len(TokenPrefix)+tokenIDLen+1:]
	if b, err := base64.RawURLEncoding.Strict().DecodeString(sec); err != nil || len(b) != 32 {
		return "", ErrMalformedToken
	}
	return id, nil
}

// HashToken returns hex(sha256(token)), the only form a token is stored in.
func HashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// TokenMatches compares the hash of tok with a stored hash in constant time.
func TokenMatches(tok, storedHash string) bool {
	got := HashToken(tok)
	return subtle.ConstantTimeCompare([]byte(got), []byte(storedHash)) == 1 && len(storedHash) == sha256.Size*2
}
