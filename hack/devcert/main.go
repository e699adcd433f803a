// Command devcert writes the self-signed certificate that `make run` gives
// the DoT, DoH, DoQ and DoH3 listeners of the dev config
// (hack/dev/service.yaml): DIR/cert.pem and DIR/key.pem (0600), for
// localhost, 127.0.0.1 and ::1. Clients trust it with the certificate
// itself as CA (kdig +tls-ca=.run/tls/cert.pem). A certificate that is
// still valid for a day is kept, so the node's reload of changed files
// does not fire on every `make run`.
//
//	go run ./hack/devcert .run/tls
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: devcert DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "devcert:", err)
		os.Exit(1)
	}
}

func run(dir string, now time.Time) error {
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if valid(certPath, keyPath, now.Add(24*time.Hour)) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "svc dev (make run)"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // its own CA: clients trust this one file
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: the node reloads when the certificate changes.
	if err := writeFile(keyPath, "PRIVATE KEY", kder, 0o600); err != nil {
		return err
	}
	return writeFile(certPath, "CERTIFICATE", der, 0o644)
}

// valid: the pair exists, parses, and the certificate is valid at t.
func valid(certPath, keyPath string, t time.Time) bool {
	b, err := os.ReadFile(certPath)
	if err != nil {
		return false
	}
	if _, err := os.Stat(keyPath); err != nil {
		return false
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return false
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	return err == nil && t.Before(c.NotAfter)
}

// writeFile replaces path atomically (a temp file renamed over it).
func writeFile(path, typ string, der []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".devcert-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := errors.Join(pem.Encode(tmp, &pem.Block{Type: typ, Bytes: der}), tmp.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
