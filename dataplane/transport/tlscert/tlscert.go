// Package tlscert serves a certificate loaded from PEM files and reloads it
// when the files change, without a restart: handshakes read the current
// certificate from an atomic pointer.
package tlscert

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often the files are checked for changes.
const DefaultInterval = 10 * time.Second

// Reloader holds the certificate of one cert/key file pair.
type Reloader struct {
	certFile, keyFile string
	cur               atomic.Pointer[loaded]
	stamp             string // the contents loaded last
	log               *slog.Logger
}

// loaded is a certificate and the DNS names it is for.
type loaded struct {
	cert  tls.Certificate
	exact map[string]bool // names without wildcard, lower case
	wild  map[string]bool // D of each *.D, lower case
}

func newLoaded(c tls.Certificate) *loaded {
	l := &loaded{cert: c, exact: map[string]bool{}, wild: map[string]bool{}}
	if c.Leaf == nil {
		return l
	}
	for _, n := range c.Leaf.DNSNames {
		n = strings.TrimSuffix(strings.ToLower(n), ".")
		if d, ok := strings.CutPrefix(n, "*."); ok {
			l.wild[d] = true
		} else {
			l.exact[n] = true
		}
	}
	return l
}

// New loads the pair once; an error here stops the listener from starting.
func New(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log}
	if _, err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// maxFileSize bounds what is read of a certificate or key file; chains
// are a few KB.
const maxFileSize = 1 << 20

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("tls certificate: %s is over %d bytes", path, maxFileSize)
	}
	return b, nil
}

// reload loads the files when their contents changed; it reports whether
// a new certificate was installed. A broken pair keeps the old certificate.
// Contents, not modification times, tell a change: a rewrite or a
// kubelet symlink swap within the file system's timestamp granularity,
// with the same size, would otherwise go unseen.
func (r *Reloader) reload() (bool, error) {
	certPEM, err := readBounded(r.certFile)
	if err != nil {
		return false, err
	}
	keyPEM, err := readBounded(r.keyFile)
	if err != nil {
		return false, err
	}
	st := string(certPEM) + "\x00" + string(keyPEM)
	if st == r.stamp {
		return false, nil
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("tls certificate %s: %w", r.certFile, err)
	}
	r.stamp = st
	r.cur.Store(newLoaded(c))
	return true, nil
}

// Run polls the files every interval (0: DefaultInterval) until ctx ends.
func (r *Reloader) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			changed, err := r.reload()
			switch {
			case err != nil:
				r.log.Warn("tls certificate reload failed; keeping the old one", "cert", r.certFile, "err", err)
			case changed:
				r.log.Info("tls certificate reloaded", "cert", r.certFile)
			}
		}
	}
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &r.cur.Load().cert, nil
}

// WildcardLabel returns L when serverName is L.D and the certificate in use
// has the wildcard name *.D but does not name serverName itself: the name
// a client reached through the wildcard, which carries a client ID in L
// (AdGuard's <id>.dns.example.com). Case and a final dot are ignored.
func (r *Reloader) WildcardLabel(serverName string) string {
	n := strings.TrimSuffix(strings.ToLower(serverName), ".")
	label, d, ok := strings.Cut(n, ".")
	if !ok || label == "" {
		return ""
	}
	l := r.cur.Load()
	if !l.wild[d] || l.exact[n] {
		return ""
	}
	return label
}
