// Package internalapi is the node-to-node listener (listeners.internal.*):
// TLS plus a bearer token, serving GET /internal/status, GET /internal/zones
// and GET /internal/lists/{digest} so that followers copy list bodies the
// leader fetched by digest. Without configured files the token, the CA and
// the server certificate derive deterministically (HKDF) from the
// encryption key, so every node agrees without distributing anything.
package internalapi

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"
)

// DefaultServerName is the name in the derived server certificate (and what
// clients expect unless listeners.internal.tls.serverName says otherwise).
const DefaultServerName = "internal.service.io"

// Files are the configured listeners.internal files (empty: derive).
type Files struct {
	TokenFile, CertFile, KeyFile, CAFile string
	ServerName                           string
}

// Credentials are what both ends of the internal listener need.
type Credentials struct {
	Token      string
	Cert       tls.Certificate
	CAs        *x509.CertPool
	ServerName string
}

func derive(key []byte, purpose string, n int) ([]byte, error) {
	return hkdf.Key(sha256.New, key, nil, "service/internal/"+purpose, n)
}

// epoch fixes the derived certificates' validity so every node builds the
// same bytes.
var (
	notBefore = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2124, 1, 1, 0, 0, 0, 0, time.UTC)
)

// LoadCredentials reads the configured files, deriving what is not
// configured from encryptionKey.
func LoadCredentials(f Files, encryptionKey []byte) (*Credentials, error) {
	c := &Credentials{ServerName: f.ServerName}
	if c.ServerName == "" {
		c.ServerName = DefaultServerName
	}
	needKey := f.TokenFile == "" || f.CertFile == "" || f.CAFile == ""
	if needKey && len(encryptionKey) == 0 {
		return nil, errors.New("internal listener: no encryption key to derive the token and CA from")
	}
	if f.TokenFile != "" {
		b, err := os.ReadFile(f.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("internal token: %w", err)
		}
		c.Token = strings.TrimSpace(string(b))
		if len(c.Token) < 32 {
			return nil, errors.New("internal token: shorter than 32 characters")
		}
	} else {
		t, err := derive(encryptionKey, "token", 32)
		if err != nil {
			return nil, err
		}
		c.Token = hex.EncodeToString(t)
	}
	if f.CertFile != "" || f.CAFile != "" {
		if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
			return nil, errors.New("internal tls: certFile, keyFile and caFile go together")
		}
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("internal tls: %w", err)
		}
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("internal tls: %w", err)
		}
		c.CAs = x509.NewCertPool()
		if !c.CAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("internal tls: no certificate in caFile")
		}
		c.Cert = cert
		return c, nil
	}
	ca, leaf, err := derivedCerts(encryptionKey, c.ServerName)
	if err != nil {
		return nil, err
	}
	c.CAs = x509.NewCertPool()
	c.CAs.AddCert(ca)
	c.Cert = leaf
	return c, nil
}

// derivedCerts builds the CA and the server certificate from Ed25519 keys
// derived from the encryption key; Ed25519 signatures are deterministic, so
// every node builds the same certificates.
func derivedCerts(key []byte, serverName string) (*x509.Certificate, tls.Certificate, error) {
	caSeed, err := derive(key, "ca", ed25519.SeedSize)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafSeed, err := derive(key, "server", ed25519.SeedSize)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caKey := ed25519.NewKeyFromSeed(caSeed)
	leafKey := ed25519.NewKeyFromSeed(leafSeed)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "service internal CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(nil, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("internal CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: serverName},
		DNSNames:     []string{serverName},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(nil, leafTmpl, ca, leafKey.Public(), caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("internal certificate: %w", err)
	}
	return ca, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, nil
}

// ServerTLS is the listener's TLS configuration.
func (c *Credentials) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.Cert}, MinVersion: tls.VersionTLS13}
}

// ClientTLS is a peer's TLS configuration.
func (c *Credentials) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.CAs, ServerName: c.ServerName, MinVersion: tls.VersionTLS13}
}
