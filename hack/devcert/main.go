// Command devcert writes the certificate that `make run` gives the DoT,
// DoH, DoQ and DoH3 listeners of the dev config (hack/dev/service.yaml):
// DIR/cert.pem and DIR/key.pem (0600), for localhost, 127.0.0.1 and ::1,
// issued by a throwaway CA in DIR/ca.pem whose key is never written.
// Clients trust ca.pem (kdig +tls-ca=.run/tls/ca.pem). A separate CA,
// rather than one self-signed certificate, is what real deployments look
// like.
// A certificate still valid for a day is kept, so the node's reload of
// changed files does not fire on every `make run`.
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
	caPath := filepath.Join(dir, "ca.pem")
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if valid(caPath, certPath, keyPath, now.Add(24*time.Hour)) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "svc dev CA (make run)"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 7),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               pkix.Name{CommonName: "localhost"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(caPath, "CERTIFICATE", caDER, 0o644); err != nil {
		return err
	}
	// The key before the certificate: the node reloads when the
	// certificate changes.
	if err := writeFile(keyPath, "PRIVATE KEY", kder, 0o600); err != nil {
		return err
	}
	return writeFile(certPath, "CERTIFICATE", der, 0o644)
}

// valid: the three files exist and the certificate, issued by the CA in
// caPath, is valid at t.
func valid(caPath, certPath, keyPath string, t time.Time) bool {
	if _, err := os.Stat(keyPath); err != nil {
		return false
	}
	ca, err1 := readCert(caPath)
	c, err2 := readCert(certPath)
	if err1 != nil || err2 != nil {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: t})
	return err == nil
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	return x509.ParseCertificate(blk.Bytes)
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
