package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDevCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	now := time.Now()
	if err := run(dir, now); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode())
	}
	// The pair loads, and the certificate verifies against ca.pem for
	// each name the dev listeners are reached by.
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.IsCA {
		t.Error("the served certificate is a CA")
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	// Still valid: kept byte for byte (no reload in a running node).
	if err := run(dir, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(certPath); !bytes.Equal(again, first) {
		t.Error("a valid certificate was rewritten")
	}
	// Less than a day left: replaced.
	if err := run(dir, leaf.NotAfter.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(certPath); bytes.Equal(again, first) {
		t.Error("an expiring certificate was kept")
	}
	// Garbage in place of the certificate: replaced with a good pair.
	if err := os.WriteFile(certPath, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, now); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(certPath)
	if blk, _ := pem.Decode(b); blk == nil {
		t.Fatal("garbage certificate not replaced")
	}
	if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
		t.Fatalf("replaced pair does not load: %v", err)
	}
}
