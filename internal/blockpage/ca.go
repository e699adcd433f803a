package blockpage

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/atomicfile"
)

// CA file names in the block page's state directory (<dataDir>/blockpage).
const (
	caCertFile = "ca.crt"
	caKeyFile  = "ca.key"
)

const (
	caValidity = 10 * 365 * 24 * time.Hour
	// leafValidity is short: leaves are minted on the fly and cached, so a
	// leaked leaf is worth little, and browsers cap leaf lifetimes anyway.
	leafValidity = 7 * 24 * time.Hour
	// leafRenewBefore: a cached leaf this close to expiry is minted again.
	leafRenewBefore = 24 * time.Hour
	// maxLeaves bounds the leaf cache (one per server name, LRU).
	maxLeaves = 1024
)

// CA is the generated block page certificate authority. It mints a leaf
// certificate for each server name a browser asks for (TLS SNI), so a
// browser that trusts the CA shows the block page over HTTPS without a
// warning.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	leafKey *ecdsa.PrivateKey // one key for every leaf: minting only signs
	now     func() time.Time

	mu     sync.Mutex
	leaves map[string]*list.Element // name -> *leafEntry in lru
	lru    *list.List               // front: most recently used
}

type leafEntry struct {
	name string
	cert *tls.Certificate
	exp  time.Time
}

// LoadOrCreateCA reads dir/ca.crt and dir/ca.key, or generates and writes
// them (the key 0600) when neither exists, so the CA a user trusted
// survives restarts. now is the clock (time.Now when nil).
func LoadOrCreateCA(dir string, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		ca, err := parseCA(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("block page CA in %s: %w (delete %s and %s to generate a new one; browsers that trusted the old one must trust the new one)", dir, err, caCertFile, caKeyFile)
		}
		if !now().Before(ca.cert.NotAfter) {
			return nil, fmt.Errorf("block page CA %s expired on %s: delete %s and %s to generate a new one", certPath, ca.cert.NotAfter.Format(time.RFC3339), caCertFile, caKeyFile)
		}
		ca.now = now
		return ca.withLeafKey()
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
	case certErr != nil && !errors.Is(certErr, os.ErrNotExist):
		return nil, fmt.Errorf("block page CA certificate: %w", certErr)
	case keyErr != nil && !errors.Is(keyErr, os.ErrNotExist):
		return nil, fmt.Errorf("block page CA key: %w", keyErr)
	default:
		return nil, fmt.Errorf("block page CA in %s: only one of %s and %s exists; restore the other or delete both to generate a new CA", dir, caCertFile, caKeyFile)
	}
	ca, err := newCA(now)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("block page state directory: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("block page CA key: %w", err)
	}
	// the key first: a cert without its key is the state that needs a person
	if err := atomicfile.Write(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("block page CA key: %w", err)
	}
	if err := atomicfile.Write(certPath, ca.certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("block page CA certificate: %w", err)
	}
	return ca.withLeafKey()
}

func newCA(now func() time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("block page CA key: %w", err)
	}
	host, _ := os.Hostname()
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: strings.TrimSpace("service block page CA " + host), Organization: []string{"service block page"}},
		NotBefore:             t.Add(-time.Hour),
		NotAfter:              t.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("block page CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), now: now}, nil
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("ca.crt holds no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca.crt: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("ca.crt is not a CA certificate")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("ca.key holds no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca.key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("ca.key is not a signing key")
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("ca.key does not belong to ca.crt")
	}
	return &CA{cert: cert, key: signer, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}, nil
}

func (ca *CA) withLeafKey() (*CA, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("block page leaf key: %w", err)
	}
	ca.leafKey, ca.leaves, ca.lru = k, map[string]*list.Element{}, list.New()
	return ca, nil
}

// CertPEM is the CA certificate users download and trust.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// Fingerprint is the SHA-256 of the CA certificate, colon-separated hex,
// as browsers and `openssl x509 -fingerprint -sha256` show it.
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.cert.Raw)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// GetCertificate is tls.Config.GetCertificate: a cached or freshly minted
// leaf for the SNI name, or for the local IP when the client sent none.
func (ca *CA) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.TrimSuffix(strings.ToLower(hello.ServerName), ".")
	if name == "" {
		if hello.Conn == nil {
			return nil, errors.New("no server name and no connection address")
		}
		ap, err := netip.ParseAddrPort(hello.Conn.LocalAddr().String())
		if err != nil {
			return nil, fmt.Errorf("local address: %w", err)
		}
		name = ap.Addr().Unmap().String()
	}
	return ca.Leaf(name)
}

// Leaf returns a leaf certificate for name (a DNS name or an IP address).
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	ip := net.ParseIP(name)
	if ip == nil && !validHostname(name) {
		return nil, fmt.Errorf("server name %q is not a valid host name", truncate(name, 80))
	}
	now := ca.now()
	ca.mu.Lock()
	if el, ok := ca.leaves[name]; ok {
		e := el.Value.(*leafEntry)
		if now.Add(leafRenewBefore).Before(e.exp) {
			ca.lru.MoveToFront(el)
			ca.mu.Unlock()
			return e.cert, nil
		}
	}
	ca.mu.Unlock()
	// Minting outside the lock: two handshakes for one new name may both
	// mint, which is cheaper than serialising every handshake.
	cert, exp, err := ca.mint(name, ip, now)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if el, ok := ca.leaves[name]; ok {
		el.Value = &leafEntry{name: name, cert: cert, exp: exp}
		ca.lru.MoveToFront(el)
	} else {
		ca.leaves[name] = ca.lru.PushFront(&leafEntry{name: name, cert: cert, exp: exp})
	}
	for ca.lru.Len() > maxLeaves {
		old := ca.lru.Back()
		ca.lru.Remove(old)
		delete(ca.leaves, old.Value.(*leafEntry).name)
	}
	return cert, nil
}

// cachedLeaves is the number of leaves in the cache.
func (ca *CA) cachedLeaves() int {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.lru.Len()
}

func (ca *CA) mint(name string, ip net.IP, now time.Time) (*tls.Certificate, time.Time, error) {
	exp := now.Add(leafValidity)
	if exp.After(ca.cert.NotAfter) {
		exp = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     exp,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("mint block page certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, time.Time{}, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: leaf}, exp, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return sum[:20]
}

// ReadCACert returns the generated CA certificate (PEM) of a state
// directory, for routes that serve it outside the block page (an error
// wrapping os.ErrNotExist when this node generated none).
func ReadCACert(stateDir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, caCertFile))
	if err != nil {
		return nil, fmt.Errorf("block page CA: %w", err)
	}
	return b, nil
}
