// Package testpki makes the certificates the TLS tests use: a CA made by
// the test and a server certificate for ServerName, *.ServerName and
// 127.0.0.1 issued by it, written to files (what listeners load) and kept
// in memory (what in-process servers and clients use). Imported only by
// tests.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServerName is the name the server certificate is for.
const ServerName = "dns.test"

// PKI is a test CA and its current server certificate.
type PKI struct {
	Dir               string // a temp dir of the test
	CAFile            string // the CA certificate (PEM)
	CAPEM             []byte
	CertFile, KeyFile string         // the server certificate and key (PEM)
	Pool              *x509.CertPool // trusts the CA
	Leaf              tls.Certificate

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// New makes a CA and a server certificate (serial 2) in a temp dir.
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool(), caCert: ca, caKey: key}
	p.Pool.AddCert(ca)
	p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(p.CAFile, p.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	p.Issue(t, 2)
	return p
}

// Issue makes a new server certificate with the given serial number and
// replaces the files atomically (rename), as a certificate renewal does.
func (p *PKI) Issue(t testing.TB, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: ServerName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{ServerName, "*." + ServerName}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, p.KeyFile+".tmp", "PRIVATE KEY", kb)
	writePEM(t, p.CertFile+".tmp", "CERTIFICATE", der)
	for _, f := range []string{p.KeyFile, p.CertFile} {
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	p.Leaf = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// ClientTLS trusts the CA and expects ServerName.
func (p *PKI) ClientTLS(protos ...string) *tls.Config {
	return &tls.Config{RootCAs: p.Pool, ServerName: ServerName, NextProtos: protos}
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
