package tlscert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writePair writes a self-signed certificate with serial for names (none:
// dns.test) and its key.
func writePair(t *testing.T, certPath, keyPath string, serial int64, names ...string) {
	t.Helper()
	if len(names) == 0 {
		names = []string{"dns.test"}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: names}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

func serialOf(t *testing.T, r *Reloader) int64 {
	t.Helper()
	c, _ := r.GetCertificate(&tls.ClientHelloInfo{})
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.Int64()
}

// waitSerial polls until r serves serial (bounded).
func waitSerial(t *testing.T, r *Reloader, serial int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for serialOf(t, r) != serial {
		if time.Now().After(deadline) {
			t.Fatalf("serving serial %d, want %d", serialOf(t, r), serial)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKubeletSecretSwap: a Secret volume as the kubelet writes it
// (tls.crt -> ..data/tls.crt, ..data -> a timestamped directory, updated
// by writing a new directory and renaming a new ..data link over the old)
// is reloaded after the swap; a half-written update (certificate and key
// that do not match) keeps the old certificate until the pair is whole.
func TestKubeletSecretSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, serial int64) {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writePair(t, filepath.Join(d, "tls.crt"), filepath.Join(d, "tls.key"), serial)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_11_22_10_00_00.1", 1)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := serialOf(t, r); got != 1 {
		t.Fatalf("serving serial %d, want 1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	version("..2026_11_22_11_00_00.2", 2)
	waitSerial(t, r, 2)

	// A certificate written without its key (plain files, as a tool that
	// writes one file at a time would leave them) is not taken...
	plainCert, plainKey := filepath.Join(dir, "plain.crt"), filepath.Join(dir, "plain.key")
	writePair(t, plainCert, plainKey, 3)
	r2, err := New(plainCert, plainKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	done2 := make(chan struct{})
	go func() { defer close(done2); r2.Run(ctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-done2 }()
	other := filepath.Join(t.TempDir(), "other.key")
	writePair(t, plainCert, other, 4) // certificate 4, key still 3's
	time.Sleep(100 * time.Millisecond)
	if got := serialOf(t, r2); got != 3 {
		t.Fatalf("took a certificate without its key: serving %d", got)
	}
	// ...until the key follows.
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plainKey, b, 0o600); err != nil {
		t.Fatal(err)
	}
	waitSerial(t, r2, 4)

	// A pair rewritten in place with the same sizes and the old
	// modification times (a rewrite within the file system's timestamp
	// granularity looks like this) is still seen: contents decide.
	fi, err := os.Stat(plainCert)
	if err != nil {
		t.Fatal(err)
	}
	oldCert, _ := os.ReadFile(plainCert)
	oldKey, _ := os.ReadFile(plainKey)
	dir2 := t.TempDir()
	c5, k5 := filepath.Join(dir2, "c"), filepath.Join(dir2, "k")
	for try := 0; ; try++ {
		writePair(t, c5, k5, 5)
		cb, _ := os.ReadFile(c5)
		kb, _ := os.ReadFile(k5)
		if len(cb) == len(oldCert) && len(kb) == len(oldKey) {
			_ = os.WriteFile(plainKey, kb, 0o600)
			_ = os.WriteFile(plainCert, cb, 0o644)
			break
		}
		if try == 200 {
			t.Fatal("no pair of the same sizes in 200 tries")
		}
	}
	for _, f := range []string{plainCert, plainKey} {
		if err := os.Chtimes(f, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	waitSerial(t, r2, 5)
}

// TestWildcardLabel: the label before a wildcard name of the certificate,
// unless the certificate names the server name itself.
func TestWildcardLabel(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	writePair(t, certPath, keyPath, 1, "dns.test", "*.dns.test", "*.Corp.Example.", "named.corp.example")
	r, err := New(certPath, keyPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for sni, want := range map[string]string{
		"kids.dns.test":      "kids",
		"KIDS.DNS.TEST.":     "kids",
		"dns.test":           "",  // the server's own name
		"a.b.dns.test":       "",  // a wildcard covers one label
		"x.corp.example":     "x", // wildcard names are compared without case or final dot
		"named.corp.example": "",  // named in the certificate: not an ID
		"x.other.test":       "",
		"":                   "",
		".dns.test":          "",
	} {
		if got := r.WildcardLabel(sni); got != want {
			t.Errorf("WildcardLabel(%q) = %q, want %q", sni, got, want)
		}
	}
}
