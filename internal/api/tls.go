package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsConfig returns nil for plain HTTP (tls.auto off without files).
func (s *Server) tlsConfig() (*tls.Config, error) {
	cert, key := s.opts.TLSCertFile, s.opts.TLSKeyFile
	if cert == "" {
		if s.opts.TLSAuto == "off" {
			return nil, nil
		}
		var err error
		if cert, key, err = ensureSelfSigned(filepath.Join(s.opts.DataDir, "tls"), s.opts.NodeName, s.clock()); err != nil {
			return nil, err
		}
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("api tls: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}}, nil
}

// ensureSelfSigned generates a certificate into dir once and reuses it
// across restarts, so that clients pinning it keep working.
func ensureSelfSigned(dir, node string, now time.Time) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		return certFile, keyFile, nil
	} else if _, serr := os.Stat(certFile); serr == nil || !errors.Is(serr, fs.ErrNotExist) {
		return "", "", fmt.Errorf("api tls: existing %s unusable: %w", certFile, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("api tls: %w", err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("api tls: %w", err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	names := []string{"localhost"}
	if node != "" && node != "localhost" {
		names = append(names, node)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "service self-signed"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return "", "", fmt.Errorf("api tls: %w", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", fmt.Errorf("api tls: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", "", fmt.Errorf("api tls: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", fmt.Errorf("api tls: %w", err)
	}
	return certFile, keyFile, nil
}
