package kubeenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards loopback TCP to the apiserver and can cut and restore the
// connection, making the apiserver unreachable for one client only while the
// shared test environment keeps running.
type Proxy struct {
	target string
	// Addr is where clients connect (127.0.0.1:port); it stays the same
	// across Cut and Restore.
	Addr  string
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

// NewProxy starts a proxy to target; it is cut when the test ends.
func NewProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// Cut closes the listener and every forwarded connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore listens again on the same address.
func (p *Proxy) Restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}
